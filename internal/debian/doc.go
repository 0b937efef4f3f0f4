// Package debian is lockstep's one reader of Debian's formats: apt's source
// files (the one-line sources.list and deb822 .sources), binary package
// control data and package versions, and .deb archives. The deb822
// paragraphs, control files, versions and archives are read by
// pault.ag/go/debian; this package adds what apt's sources mean (which entry
// is Debian's own archive) and extraction with SHA-256s.
package debian
