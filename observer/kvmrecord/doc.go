// Package kvmrecord holds the KVM observer's output: the KVM record
// <key>_<exercise>.abi10.json (schema 1), what the observer saw of one
// exercise in a guest on a pinned kernel (the cross-check of strace against
// Landlock's audit records, and the ABI 10 rows the audit records prove),
// and its sidecar <key>_<exercise>.abi10.cfg, in Phobos's formats.
//
// It is a leaf of data, apart from the observer's run, so the programs that
// only read or merge KVM records (orchestrate, verify, report, pruneguest)
// do not compile the KVM run. Records are encoded, hashed and validated
// with package record's helpers, as the prune records are:
//
//	path, err := kvmrecord.Write(dir, r) // validated, atomic
//	k, err := kvmrecord.Read(path)       // validated, its name checked
//	err = k.Vouches(cfg, sidecar)        // the .cfg and .abi10.cfg it describes
package kvmrecord
