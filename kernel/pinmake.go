package kernel

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/lockstep-sandbox/lockstep/internal/debian"
	"github.com/lockstep-sandbox/lockstep/internal/lazyre"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
	"github.com/lockstep-sandbox/lockstep/landlock"
)

// PinRequest is what MakePin is asked to pin.
type PinRequest struct {
	Source  string // SourceDebian (linux-source-X.Y) or SourceDebianImage (linux-image-…)
	Package string // e.g. linux-source-7.3, linux-image-amd64 (a meta package is followed to its image)
	Version string // the package version; "" is the suite's candidate
	Suite   string // "" is this machine's own (VERSION_CODENAME of /etc/os-release)
	Name    string // the pin's name; "" is the kernel version (source) or the release (image)
	ABI     int    // the Landlock ABI; 0 derives it from the upstream version (landlock.ReleaseABI)
}

// MadePin is a pin MakePin computed from what it fetched.
type MadePin struct {
	Pin
	Deb string // the fetched .deb, in the download cache
}

// MakePin fetches the package a request names (apt-get download against a
// temporary sources list, as a debian pin is fetched), computes the .deb's
// and its member's SHA-256, and returns the pin row, parsed back. The .deb
// stays in the download cache, so building the pin fetches nothing again.
func (b *Builder) MakePin(ctx context.Context, req PinRequest) (*MadePin, error) {
	if req.Source != SourceDebian && req.Source != SourceDebianImage {
		return nil, fmt.Errorf("BUG(kernel): MakePin source %q", req.Source)
	}
	if req.Suite == "" {
		s, err := machineSuite()
		if err != nil {
			return nil, err
		}
		req.Suite = s
	}
	if err := os.MkdirAll(filepath.Join(b.root(), "downloads"), 0o755); err != nil {
		return nil, fmt.Errorf("create download cache: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Join(b.root(), "downloads"), ".pin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	a, err := b.aptUpdate(ctx, req.Suite, tmp)
	if err != nil {
		return nil, err
	}
	deb, pkg, err := fetchPackage(ctx, a, req)
	if err != nil {
		return nil, err
	}
	p, err := pinFromDeb(deb, pkg, req)
	if err != nil {
		return nil, err
	}
	final := filepath.Join(b.root(), "downloads", p.SHA256+"-"+downloadName(p.Pin))
	if err := os.Rename(deb, final); err != nil {
		return nil, fmt.Errorf("store download: %w", err)
	}
	p.Deb = final
	return p, nil
}

// fetchPackage downloads the requested package; an image request naming a
// meta package (linux-image-amd64, which holds no kernel) is followed once
// to the linux-image package it depends on, at the version it names.
func fetchPackage(ctx context.Context, a *aptTemp, req PinRequest) (string, debian.Package, error) {
	spec := req.Package
	if req.Version != "" {
		spec += "=" + req.Version
	}
	for hop := 0; ; hop++ {
		deb, err := downloadOne(ctx, a, spec)
		if err != nil {
			return "", debian.Package{}, err
		}
		d, err := debian.OpenDeb(deb)
		if err != nil {
			return "", debian.Package{}, err
		}
		pkg := d.Package
		d.Close()
		if req.Source != SourceDebianImage || hop > 0 || !isMeta(pkg) {
			return deb, pkg, nil
		}
		dep := imageDep(pkg)
		spec = dep.Name
		if dep.Version != "" {
			spec += "=" + dep.Version
		}
		a.b.log().Info("kernel: "+pkg.Name+" is a meta package; following it", "to", spec)
		if err := os.Remove(deb); err != nil {
			return "", debian.Package{}, err
		}
	}
}

var imagePkgRE = lazyre.New(`^linux-image-[0-9]`)

// isMeta: a linux-image package without a release in its name, depending on
// one with.
func isMeta(p debian.Package) bool {
	return !imagePkgRE.MatchString(p.Name) && imageDep(p).Name != ""
}

func imageDep(p debian.Package) debian.Dep {
	for _, d := range p.Depends {
		if imagePkgRE.MatchString(d.Name) {
			return d
		}
	}
	return debian.Dep{}
}

// downloadOne runs apt-get download spec into a's empty dl/ and returns the
// one .deb it left.
func downloadOne(ctx context.Context, a *aptTemp, spec string) (string, error) {
	if err := a.download(ctx, spec); err != nil {
		return "", err
	}
	debs, _ := filepath.Glob(filepath.Join(a.dl(), "*.deb"))
	if len(debs) != 1 {
		return "", fmt.Errorf("apt-get download %s left %d .deb files in %s, want one", spec, len(debs), a.dl())
	}
	return debs[0], nil
}

// pinFromDeb hashes the .deb and its member (the kernel tarball, or the
// vmlinuz) and renders and re-parses the row.
func pinFromDeb(deb string, pkg debian.Package, req PinRequest) (*MadePin, error) {
	sum, err := fileSHA256(deb)
	if err != nil {
		return nil, err
	}
	member, memberSum, err := debMember(deb, req.Source)
	if err != nil {
		return nil, err
	}
	upstream := upstreamVersion(pkg.Version)
	name := req.Name
	if name == "" {
		name = upstream
		if req.Source == SourceDebianImage {
			_, name, _ = strings.Cut(filepath.Base(member), "vmlinuz-")
		}
	}
	abi := req.ABI
	if abi == 0 {
		if abi, err = releaseABI(upstream); err != nil {
			return nil, err
		}
	}
	row := fmt.Sprintf("%s abi=%d source=%s package=%s version=%s suite=%s sha256=%s inner=%s inner-sha256=%s",
		name, abi, req.Source, pkg.Name, pkg.Version, req.Suite, sum, member, memberSum)
	pins, err := ParsePins("kernel pin", []byte(row))
	if err != nil {
		return nil, fmt.Errorf("the row for %s=%s does not parse (give --name or --abi?): %w", pkg.Name, pkg.Version, err)
	}
	return &MadePin{Pin: pins[0]}, nil
}

// debMember finds the member a pin of source names inside the .deb and
// hashes it: usr/src/linux-source-X.Y.tar.* for a source package,
// boot/vmlinuz-<release> for an image.
func debMember(deb, source string) (string, string, error) {
	d, err := debian.OpenDeb(deb)
	if err != nil {
		return "", "", err
	}
	defer d.Close()
	want := func(n string) bool {
		return strings.HasPrefix(n, "usr/src/linux-source-") && strings.Contains(n, ".tar.")
	}
	what := "usr/src/linux-source-*.tar.*"
	if source == SourceDebianImage {
		want = func(n string) bool { return strings.HasPrefix(n, "boot/vmlinuz-") }
		what = "boot/vmlinuz-*"
	}
	var name, sum string
	err = d.Walk(func(n string, h *tar.Header, r io.Reader) error {
		if h.Typeflag != tar.TypeReg || !want(n) {
			return nil
		}
		hs := sha256.New()
		if _, err := io.Copy(hs, r); err != nil {
			return fmt.Errorf("read %s in %s: %w", n, deb, err)
		}
		name, sum = n, hex.EncodeToString(hs.Sum(nil))
		return debian.ErrStop
	})
	if err != nil {
		return "", "", err
	}
	if name == "" {
		return "", "", fmt.Errorf("%s (%s) has no %s", filepath.Base(deb), d.Name, what)
	}
	return name, sum, nil
}

func fileSHA256(path string) (string, error) {
	f, err := safefile.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// upstreamVersion is a Debian kernel package version without its epoch,
// revision and backport suffix: 7.3.4-1~bpo13+1 is 7.3.4.
func upstreamVersion(v string) string {
	if _, after, ok := strings.Cut(v, ":"); ok {
		v = after
	}
	v, _, _ = strings.Cut(v, "-")
	v, _, _ = strings.Cut(v, "~")
	v, _, _ = strings.Cut(v, "+")
	return v
}

// releaseABI is landlock.ReleaseABI of a kernel version like 6.1.176.
func releaseABI(upstream string) (int, error) {
	f := strings.SplitN(upstream, ".", 3)
	if len(f) >= 2 {
		major, e1 := strconv.Atoi(f[0])
		minor, e2 := strconv.Atoi(f[1])
		if e1 == nil && e2 == nil {
			if abi, ok := landlock.ReleaseABI(major, minor); ok && abi > 0 {
				return abi, nil
			} else if ok {
				return 0, fmt.Errorf("the kernel %d.%d predates Landlock (5.13 and later have it)", major, minor)
			}
		}
	}
	return 0, fmt.Errorf("the Landlock ABI of Linux %s is not known here: give it with --abi (the guest's proof checks it)", upstream)
}

// machineSuite is this machine's Debian suite, VERSION_CODENAME in
// /etc/os-release.
func machineSuite() (string, error) {
	raw, err := safefile.ReadFile("/etc/os-release", 1<<16)
	if err != nil {
		return "", fmt.Errorf("this machine's suite: %w (give --suite)", err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VERSION_CODENAME="); ok && strings.Trim(v, `"`) != "" {
			return strings.Trim(v, `"`), nil
		}
	}
	return "", fmt.Errorf("/etc/os-release names no VERSION_CODENAME: give --suite")
}
