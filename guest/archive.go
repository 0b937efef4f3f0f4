package guest

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// MaxResults bounds the uncompressed size of a results archive the host
// accepts, and the compressed frame the guest may send.
const MaxResults = 1 << 30

// PackResults returns dir's tree as a zstd-compressed tar: directories,
// regular files and symlinks, names relative to dir. A missing dir packs as
// an empty archive.
func PackResults(dir string) ([]byte, error) {
	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		return tarEntry(tw, p, rel, d)
	})
	if err != nil {
		return nil, fmt.Errorf("pack results %s: %w", dir, err)
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("pack results %s: %w", dir, err)
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, fmt.Errorf("zstd encoder: %w", err)
	}
	defer enc.Close()
	return enc.EncodeAll(tarBuf.Bytes(), nil), nil
}

// tarEntry writes p, named rel, to tw: a directory, a regular file with
// its content or a symlink; anything else is left out.
func tarEntry(tw *tar.Writer, p, rel string, d fs.DirEntry) error {
	info, err := d.Info()
	if err != nil {
		return err
	}
	link := ""
	if info.Mode()&fs.ModeSymlink != 0 {
		if link, err = os.Readlink(p); err != nil {
			return err
		}
	} else if !info.Mode().IsRegular() && !info.IsDir() {
		return nil // sockets, fifos, devices are not results
	}
	hdr, err := tar.FileInfoHeader(info, link)
	if err != nil {
		return fmt.Errorf("tar header for %s: %w", rel, err)
	}
	hdr.Name = filepath.ToSlash(rel)
	if info.IsDir() {
		hdr.Name += "/"
	}
	hdr.Uname, hdr.Gname = "", ""
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("tar %s: %w", rel, err)
	}
	if !info.Mode().IsRegular() {
		return nil
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	f.Close()
	if err != nil {
		return fmt.Errorf("tar %s: %w", rel, err)
	}
	return nil
}

// UnpackResults extracts a PackResults archive into dir (created if needed).
// Every name must stay inside dir: absolute names, ".." and writes through
// symlinks are refused (extraction goes through os.Root). It returns the
// number of regular files written.
func UnpackResults(archive []byte, dir string) (int, error) {
	dec, err := zstd.NewReader(bytes.NewReader(archive), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(MaxResults))
	if err != nil {
		return 0, fmt.Errorf("zstd decoder: %w", err)
	}
	defer dec.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, fmt.Errorf("results directory: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, fmt.Errorf("results directory: %w", err)
	}
	defer root.Close()
	tr := tar.NewReader(io.LimitReader(dec, MaxResults))
	files := 0
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return files, nil
		}
		if err != nil {
			return files, fmt.Errorf("unpack results: %w", err)
		}
		name := path.Clean(hdr.Name)
		if !fs.ValidPath(name) || name == "." || strings.Contains(hdr.Name, "\\") {
			return files, fmt.Errorf("unpack results: entry %q: want a relative path inside the results", hdr.Name)
		}
		if d := path.Dir(name); d != "." {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return files, fmt.Errorf("unpack results: %s: %w", name, err)
			}
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o755); err != nil {
				return files, fmt.Errorf("unpack results: %s: %w", name, err)
			}
		case tar.TypeReg:
			f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fs.FileMode(hdr.Mode)&0o755|0o600)
			if err != nil {
				return files, fmt.Errorf("unpack results: %s: %w", name, err)
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return files, fmt.Errorf("unpack results: %s: %w", name, err)
			}
			files++
		case tar.TypeSymlink:
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				return files, fmt.Errorf("unpack results: %s: %w", name, err)
			}
		default:
			return files, fmt.Errorf("unpack results: entry %q has type %q: want a file, directory or symlink", hdr.Name, hdr.Typeflag)
		}
	}
}
