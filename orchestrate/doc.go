// Package orchestrate merges the pruner's per-exercise policies and the KVM
// observer's ABI-10 sidecars into the policy tree that ships: one base per
// language, one exercise file per exercise, the ABI-10 rows apart from every
// base, and files for review.
//
// # Checks first
//
// Every input is checked before anything is merged, and every problem is
// collected: aborted exercises, retired .paths files, a record without its
// .cfg and the reverse, record schema, stage, key and exercise names, the
// SHA-256 each record names against the raw bytes of the file beside it, and
// for ABI-10 records and sidecars the rules of docs/orchestrate.md. Any
// problem is a *Refusal, and nothing is written.
//
// # Writing
//
// Everything is rendered in memory first. The new tree is then built in a
// temporary sibling of the output directory (the previous tree's files that
// this merge does not own are carried over; the requested languages' stale
// files are not), synced to disk, and exchanged with the old tree in one
// renameat2(RENAME_EXCHANGE). A refusal, an error or a crash at any point
// leaves the previous tree byte-identical, or the complete new one.
//
// # Two observers
//
// With two or more KVM result directories (Options.KVMDirs), the sidecars of
// every directory must hold the same rows (comment lines ignored: the header
// holds a date) and the same set of sidecars, else the merge is refused
// naming the exercise and the rows; the first directory's records then stand
// for all.
//
// Example:
//
//	sum, err := orchestrate.Run(orchestrate.Options{
//		Langs: []string{"java"}, PathDir: "path_sets", CoreDir: "core",
//	})
//	var r *orchestrate.Refusal
//	if errors.As(err, &r) {
//		for _, p := range r.Problems { fmt.Println(p) }
//	}
package orchestrate
