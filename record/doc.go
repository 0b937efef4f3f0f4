// Package record holds the files a prune leaves beside each policy, in
// Phobos's formats: the exercise record <key>_<exercise>.json (schema 2) and
// the abort record <key>_<exercise>.aborted.json, with what every record
// shares: provenance, hashes, the encoder and the validation helpers
// ([Problems], [ParseInto], [Write]) that the KVM record
// (observer/kvmrecord) is built on. Each type has the exact JSON field
// names; readers validate (every problem at once) and writers write
// atomically.
//
// # Writing
//
//	r := &record.Exercise{Key: "generic", Exercise: "shell-reference", Stage: record.StageAll,
//		Provenance: prov, CfgSHA256: record.SHA256Hex(cfg), Policy: record.FromPolicy(p, nil), Log: log}
//	path, err := record.WriteExercise(outDir, r)
//
// Files are written as Python's json.dumps(obj, indent=2, sort_keys=True)
// followed by a newline writes them (keys sorted, two-space indent, every
// non-ASCII character and DEL escaped as \uXXXX, floats in Python's repr,
// e.g. 3.0), so a record lockstep writes and one Phobos writes for the same
// content are the same bytes. [Marshal] is that encoder. A file is written
// through lockstep's one atomic writer (internal/safefile): a temporary file
// beside its target, synced, and renamed over it.
//
// # Hashes
//
// cfg_sha256, verified_cfg_sha256 and abi10_cfg_sha256 are the lower-case
// hex SHA-256 of the file's raw bytes, without a "sha256:" prefix, as
// Phobos's orchestrator compares them ([SHA256Hex]). Phobos's guest hashed
// newline-translated text; lockstep hashes raw bytes everywhere.
//
// # Log entries
//
// The exercise record's log is a list of objects, each with a "stage" naming
// its kind ("baseline", "permissive", "filesystem", "denials", "grow",
// "widenings", "containment", …, the kinds Phobos's records use). [Entry]
// holds any of them; [RunEntry], [BaselineEntry], [MinimisationEntry] and
// [ContainmentEntry] are the typed forms of the common kinds, converted with
// [NewEntry] and [Entry.Decode].
package record
