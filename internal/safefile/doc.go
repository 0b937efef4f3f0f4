// Package safefile is how lockstep reads the files it is handed and replaces
// the files it writes.
//
// Reading ([ReadFile], [Open]): a path given by a user, a CI step or a guest
// may name a FIFO (an open for reading waits for a writer, forever),
// /dev/zero (a read never ends), a directory or a socket. Only a regular
// file is read: the path is stat-ed, then opened with O_NONBLOCK (so a FIFO
// swapped in meanwhile cannot hang the open) and O_NOCTTY, and the open file
// is fstat-ed again before a byte is read. Reads stop at a limit each caller
// chooses. Nothing here blocks or ignores signals: every step returns.
//
// Writing ([WriteFile], [OpenAppend]): a file is replaced through a
// temporary file in its own directory, synced and renamed over it, so a
// reader sees the old file or the new one, never a part. The replacement
// keeps the permission bits and the owner of the file it replaces, and a
// path that is a symbolic link keeps the link: its target is replaced.
package safefile
