package debian

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"
)

// The real meta package of Debian 12's kernel, captured with
//
//	cd internal/debian/testdata && apt-get download linux-image-amd64=6.1.176-1
const metaDeb = "testdata/linux-image-amd64_6.1.176-1_amd64.deb"

func TestOpenDeb(t *testing.T) {
	d, err := OpenDeb(metaDeb)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	want := Package{Name: "linux-image-amd64", Version: "6.1.176-1", Architecture: "amd64",
		Depends: []Dep{{Name: "linux-image-6.1.0-50-amd64", Version: "6.1.176-1"}}}
	if !reflect.DeepEqual(d.Package, want) {
		t.Errorf("OpenDeb = %+v, want %+v", d.Package, want)
	}
	var names []string
	if err := d.Walk(func(name string, h *tar.Header, r io.Reader) error {
		if h.Typeflag == tar.TypeReg {
			names = append(names, name)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(names, []string{"usr/share/bug/linux-image-amd64/presubj"}) {
		t.Errorf("data files = %q, want its one file (dpkg-deb -c)", names)
	}
}

func TestOpenDebErrors(t *testing.T) {
	if _, err := OpenDeb("testdata/missing.deb"); err == nil {
		t.Error("OpenDeb of a missing file succeeded")
	}
	if _, err := ReadDeb(strings.NewReader("!<arch>\nnot a deb"), "x.deb"); err == nil || !strings.HasPrefix(err.Error(), "read .deb x.deb: ") {
		t.Errorf("ReadDeb(garbage) = %v", err)
	}
}

func TestCheckVersion(t *testing.T) {
	for _, v := range []string{"6.1.176-1", "7.3.4-1~bpo13+1", "1:2.0", "7.2.13-1"} {
		if err := CheckVersion(v); err != nil {
			t.Errorf("CheckVersion(%q) = %v", v, err)
		}
	}
	for _, v := range []string{"", "-1", "a b"} {
		if err := CheckVersion(v); err == nil {
			t.Errorf("CheckVersion(%q) accepted", v)
		}
	}
}

// FuzzReadDeb: a .deb from a download cache is outside input. Either an
// error, or control data whose walk ends.
func FuzzReadDeb(f *testing.F) {
	seed, err := os.ReadFile(metaDeb)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Fuzz(func(t *testing.T, src []byte) {
		d, err := ReadDeb(bytes.NewReader(src), "f.deb")
		if err != nil {
			return
		}
		defer d.Close()
		n := 0
		_ = d.Walk(func(string, *tar.Header, io.Reader) error {
			if n++; n > 1000 {
				return ErrStop
			}
			return nil
		})
	})
}
