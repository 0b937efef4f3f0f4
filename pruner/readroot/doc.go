// Package readroot holds a pinned read root to its manifest: a directory
// tree (such as Debian's Maven repository) that a pruned policy reads as
// one [read] entry instead of file by file, because a manifest of SHA-256
// sums fixes what is in it.
//
// The manifest is sha256sum's own format, one line per file:
//
//	<64 lower-case hex digits>  <path relative to the root>
//
// sorted by path, each path once, no empty, "." or ".." part, no carriage
// return. [Make] writes one for a tree; [Verify] re-hashes every listed file
// (a symbolic link is followed, as a reader of the tree follows it) and
// names the first file that differs, is missing or is not a regular file.
// Files of the tree that the manifest does not list are counted, not
// refused: a package installed later may add files beside the pinned ones.
// A device, FIFO or socket in the tree is refused.
package readroot
