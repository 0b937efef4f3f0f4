package debian

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"pault.ag/go/debian/deb"
	"pault.ag/go/debian/version"
)

// Package is a binary package's control data, as its .deb carries it.
type Package struct {
	Name, Version, Architecture string
	// Depends is, for each relation of the Depends field, its first
	// alternative.
	Depends []Dep
}

// Dep is one alternative of a relation: a package, and the version it
// must have when the relation says "= version".
type Dep struct {
	Name, Version string
}

// Deb is an open .deb archive: its control data read, its data archive
// ready to walk once.
type Deb struct {
	Package
	d     *deb.Deb
	close func() error
}

// OpenDeb opens the .deb at path and reads its control data. Close it.
func OpenDeb(path string) (*Deb, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read .deb: %w", err)
	}
	d, err := ReadDeb(f, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	closeData := d.close
	d.close = func() error { return errors.Join(closeData(), f.Close()) }
	return d, nil
}

// ReadDeb reads a .deb's control data from r (named name in errors).
// Close it.
func ReadDeb(r io.ReaderAt, name string) (*Deb, error) {
	d, err := deb.Load(r, name)
	if err != nil {
		return nil, fmt.Errorf("read .deb %s: %w", name, err)
	}
	c := d.Control
	p := Package{Name: c.Package, Version: c.Version.String(), Architecture: c.Architecture.String()}
	for _, r := range c.Depends.Relations {
		if len(r.Possibilities) == 0 {
			continue
		}
		a := r.Possibilities[0]
		d := Dep{Name: a.Name}
		if a.Version != nil && a.Version.Operator == "=" {
			d.Version = a.Version.Number
		}
		p.Depends = append(p.Depends, d)
	}
	return &Deb{Package: p, d: d, close: d.Close}, nil
}

// Close releases the archive.
func (d *Deb) Close() error { return d.close() }

// ErrStop, returned by a Walk callback, ends the walk without an error.
var ErrStop = errors.New("stop walking")

// Walk calls fn with every entry of the data archive, its name without the
// leading "./", in archive order; fn reads a regular file's contents from
// r. A .deb's data archive can be walked once.
func (d *Deb) Walk(fn func(name string, h *tar.Header, r io.Reader) error) error {
	for {
		h, err := d.d.Data.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read data of %s: %w", d.d.Path, err)
		}
		err = fn(strings.TrimPrefix(h.Name, "./"), h, d.d.Data)
		if errors.Is(err, ErrStop) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// CheckVersion refuses a string that is not a Debian package version
// (deb-version(7)), saying why.
func CheckVersion(v string) error {
	p, err := version.Parse(v)
	if err != nil {
		return fmt.Errorf("%q is not a Debian version: %w", v, err)
	}
	// deb-version(7): the upstream version must start with a digit.
	if p.Version == "" || p.Version[0] < '0' || p.Version[0] > '9' {
		return fmt.Errorf("%q is not a Debian version: its upstream part does not start with a digit", v)
	}
	return nil
}
