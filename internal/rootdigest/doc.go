// Package rootdigest computes the content digest of a root file system: the
// provenance.root_digest every default-prune record and ABI-10 record
// carries, so that the orchestrator can refuse to merge a sidecar observed on
// another root than the one the policy was pruned on.
//
// The digest is SHA-256 over a manifest of the tree (docs/orchestrate.md,
// "Root digest"): one line per entry under the top-level directories that
// hold programs, libraries and their configuration (Scope), in walk order
// (depth first, the entries of a directory in byte order of their names):
//
//	<path> TAB d TAB <mode>
//	<path> TAB f TAB <mode> TAB <size> TAB <sha256 hex of the content | unreadable>
//	<path> TAB l TAB <mode> TAB <link target>
//
// <path> starts with "/" and is relative to the root; <mode> is the
// permission bits with setuid, setgid and sticky, four octal digits.
// Ownership, times and extended attributes are left out (a root unpacked by
// an unprivileged user keeps its content but not its owners), and so are
// device nodes, FIFOs and sockets (such a user cannot create them). The
// files a container runtime or the host's network set-up provides (Excluded)
// are left out, so a container's live / and the same container exported to
// a directory have one digest.
package rootdigest
