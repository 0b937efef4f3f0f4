// Package placement decides where a grant lands: which path of a policy a
// refused access on one object becomes, and how a
// set of grants is tidied before it is tried (execute narrowing, compaction,
// the hierarchy rule). Every function is pure: what
// existed before a run and which directories may be climbed come in through
// Env, so the rules are tested as tables without a file system.
//
// # The rules
//
//   - Fine-grained roots (/etc /dev /proc /sys /root /home /run): a file read
//     there is granted file by file; elsewhere a read file becomes its parent
//     directory when that lies at depth 2 or deeper.
//   - Per-run names (/proc/<pid>/…, /proc/<pid>/task/<tid>/…,
//     /proc/<pid>/fd/<n>, /dev/pts/<n>): the number of the refusing process,
//     or one that changes between runs, makes the name per-run. Only
//     read-class sections are granted, on the smallest stable directory, and
//     never when that directory is / or a top-level directory; a write-class
//     right on a per-run name is reported, never granted, except [write] and
//     [ioctl] on /dev/pts/<n> for an exercise that uses pseudo-terminals
//     (Env.PseudoTerminals): those are granted on /dev/pts.
//   - An object that did not exist before the run is granted on its nearest
//     ancestor that did, climbing only inside the scanned roots (the working
//     directory and pre-existing write-granted directories), and never to /
//     or a top-level directory.
//   - [execute] on something the run wrote is reported unless it lies in the
//     exercise's compiled-programs directory; NarrowExecute keeps [execute]
//     off any directory that overlaps a write-class right, again except the
//     compiled-programs directory.
//   - Pinned read roots (Env.Pinned): a [read] of anything beneath one is
//     granted as the root, one entry with PinnedComment above it; a
//     write-class right inside one is reported, never granted.
//   - A write-class right on a specification ancestor (/, /var, /var/tmp) is
//     reported, never granted.
//
// What a rule does not grant is a Report with the reason, so the record can
// say why a refusal produced no grant.
package placement
