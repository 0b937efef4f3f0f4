// Package fulldisk gives tests a real file system that runs out of space: a
// small tmpfs mounted for one test, so a writer meets the kernel's own
// ENOSPC, not an injected error.
package fulldisk
