package safefile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// DefaultLimit bounds a read whose caller passes no limit: far above any
// policy, record or summary lockstep reads, far below a machine's memory.
const DefaultLimit = 64 << 20

// ErrNotRegular marks a path that names something other than a regular file.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge marks a file that holds more than the caller's limit.
var ErrTooLarge = errors.New("larger than the limit")

// Error is a refusal of one path: what it is, and what was wanted.
type Error struct {
	Op      string // "read", "write", "append"
	Path    string
	Problem string // e.g. "is a named pipe; want a regular file"
	Err     error  // ErrNotRegular or ErrTooLarge
}

func (e *Error) Error() string { return e.Op + " " + e.Path + ": " + e.Problem }

// Unwrap makes errors.Is(err, ErrNotRegular) and ErrTooLarge hold.
func (e *Error) Unwrap() error { return e.Err }

// Kind names what a file mode describes, as an error says it ("a named
// pipe", "a directory").
func Kind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "a special file"
}

func notRegular(op, path string, m fs.FileMode) error {
	return &Error{Op: op, Path: path, Problem: "is " + Kind(m) + "; want a regular file", Err: ErrNotRegular}
}

// Open opens path for reading when it is a regular file (a symbolic link is
// followed); anything else is refused with an *Error wrapping ErrNotRegular,
// without waiting. A path that does not exist gives the *fs.PathError that
// os.Open gives, so errors.Is(err, fs.ErrNotExist) holds.
func Open(path string) (*os.File, error) {
	// Stat first, so a device is never opened at all (opening some has
	// effects); the fstat after the open catches a swap in between.
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, notRegular("read", path, st.Mode())
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	if st, err = f.Stat(); err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, notRegular("read", path, st.Mode())
	}
	// O_NONBLOCK has no effect on a regular file's reads.
	return f, nil
}

// ReadFile reads the regular file at path, refusing (*Error wrapping
// ErrTooLarge) one that holds more than limit bytes; limit <= 0 means
// DefaultLimit. Errors are as Open's.
func ReadFile(path string, limit int64) ([]byte, error) {
	if limit <= 0 {
		limit = DefaultLimit
	}
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tooLarge := &Error{Op: "read", Path: path, Problem: fmt.Sprintf("holds more than %d bytes; want at most %d", limit, limit), Err: ErrTooLarge}
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > limit {
		return nil, tooLarge
	}
	// The size is a hint only: /proc files say 0, and a file may grow.
	var b bytes.Buffer
	b.Grow(int(st.Size()) + 512)
	if _, err := b.ReadFrom(io.LimitReader(f, limit+1)); err != nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	if int64(b.Len()) > limit {
		return nil, tooLarge
	}
	return b.Bytes(), nil
}
