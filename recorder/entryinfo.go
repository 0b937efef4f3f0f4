package recorder

import (
	"io/fs"
	"path"
	"time"
)

// entryInfo is an Entry as an fs.FileInfo, for attribution's Lstat.
type entryInfo Entry

func (e entryInfo) Name() string       { return path.Base(e.Path) }
func (e entryInfo) Size() int64        { return 0 }
func (e entryInfo) ModTime() time.Time { return time.Time{} }
func (e entryInfo) IsDir() bool        { return e.Dir }
func (e entryInfo) Sys() any           { return nil }
func (e entryInfo) Mode() fs.FileMode {
	if e.Dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}
