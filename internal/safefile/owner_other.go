//go:build !unix

package safefile

import (
	"io/fs"
	"os"
)

// keepOwner does nothing where files have no Unix owner.
func keepOwner(*os.File, string, fs.FileInfo) error { return nil }
