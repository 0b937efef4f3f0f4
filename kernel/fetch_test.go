package kernel

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// tinyTarball writes a gzip tarball holding linux-9.9/Makefile and returns
// its path and SHA-256.
func tinyTarball(t *testing.T) (string, string) {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range []struct{ name, body string }{{"linux-9.9/", ""}, {"linux-9.9/Makefile", "VERSION = 9\n"}} {
		h := &tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), Typeflag: tar.TypeReg}
		if strings.HasSuffix(f.name, "/") {
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(f.body))
	}
	tw.Close()
	gz.Close()
	path := filepath.Join(t.TempDir(), "linux-9.9.tar.gz")
	write(t, path, buf.Bytes())
	return path, sha256Hex(buf.Bytes())
}

func TestWrongSHA256AbortsBeforeUnpacking(t *testing.T) {
	tarball, real := tinyTarball(t)
	wrong := strings.Repeat("0", 64)
	pins, err := ParsePins("test", []byte("9.9 abi=10 source=url url=file://"+tarball+" sha256="+wrong))
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	b := &Builder{CacheDir: cache, Pins: pins}
	_, err = b.sources(t.Context(), pins[0])
	var he *HashError
	if !errors.As(err, &he) {
		t.Fatalf("sources with a wrong pin hash = %v, want *HashError", err)
	}
	if he.Want != wrong || he.Got != real || !strings.Contains(err.Error(), wrong) || !strings.Contains(err.Error(), real) {
		t.Errorf("HashError = %q, want expected %s and actual %s both printed", err, wrong, real)
	}
	// Nothing was unpacked or kept: no source tree, no download.
	for _, sub := range []string{"sources", "downloads"} {
		ents, _ := os.ReadDir(filepath.Join(cache, sub))
		for _, e := range ents {
			if !strings.HasSuffix(e.Name(), ".lock") {
				t.Errorf("%s/%s left behind after a hash mismatch", sub, e.Name())
			}
		}
	}
	// Build reports the same error (before configure could run).
	if _, err := b.Build(t.Context(), "9.9"); !errors.As(err, &he) {
		t.Errorf("Build = %v, want *HashError", err)
	}
}

func TestSourcesFetchesChecksAndCaches(t *testing.T) {
	tarball, sum := tinyTarball(t)
	pins, err := ParsePins("test", []byte("9.9 abi=10 source=url url=file://"+tarball+" sha256="+sum))
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	b := &Builder{CacheDir: cache, Pins: pins}
	// What a process killed mid-unpack left is removed under the lock.
	dead := filepath.Join(cache, "sources", ".unpack-"+sum[:12]+"-123")
	if err := os.MkdirAll(filepath.Join(dead, "linux-9.9"), 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := b.sources(t.Context(), pins[0])
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(cache, "sources", sum, "linux-9.9"); src != want {
		t.Errorf("sources = %s, want %s", src, want)
	}
	if got, _ := os.ReadFile(filepath.Join(src, "Makefile")); string(got) != "VERSION = 9\n" {
		t.Errorf("unpacked Makefile = %q", got)
	}
	if _, err := os.Stat(dead); err == nil {
		t.Errorf("%s of a dead process survived", dead)
	}
	if st := b.sourceState(pins[0]); st != "unpacked" {
		t.Errorf("sourceState = %q, want unpacked", st)
	}
	// A second call uses the cache even when the URL is gone.
	os.Remove(tarball)
	if again, err := b.sources(t.Context(), pins[0]); err != nil || again != src {
		t.Errorf("cached sources = %q, %v; want %q", again, err, src)
	}
	// A corrupted cached download is refused, not trusted.
	dl := filepath.Join(cache, "downloads", sum+"-linux-9.9.tar.gz")
	write(t, dl, []byte("corrupt"))
	if _, err := b.download(t.Context(), pins[0]); !errors.As(err, new(*HashError)) {
		t.Errorf("download with a corrupt cached file = %v, want *HashError", err)
	}
}

// TestFetchStalledServer: a server that never answers, and one that sends
// its headers and a few bytes and then stalls, each fail the fetch within
// their timeout (shortened here) and say which wait ran out; before, the
// stalled body held the fetch forever. Local servers, so it runs anywhere.
func TestFetchStalledServer(t *testing.T) {
	saved := fetchTimeouts
	t.Cleanup(func() { fetchTimeouts = saved })
	fetchTimeouts.Header, fetchTimeouts.Idle = 300*time.Millisecond, 300*time.Millisecond
	for _, tc := range []struct {
		name, reply, want string
	}{
		{"no answer", "", "timeout awaiting response headers"},
		{"stalled body", "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n0123456789", "no data for 300ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				c.Write([]byte(tc.reply))
				time.Sleep(5 * time.Second) // stall, holding the connection
			}()
			b := &Builder{CacheDir: t.TempDir()}
			pin := Pin{Version: "9.9", URL: "http://" + ln.Addr().String() + "/linux-9.9.tar.gz"}
			start := time.Now()
			_, err = b.fetchURL(t.Context(), pin, t.TempDir())
			if d := time.Since(start); err == nil || !strings.Contains(err.Error(), tc.want) || d > 3*time.Second {
				t.Errorf("fetch from a server that stalls = %v after %s; want an error naming %q within 3 s", err, d.Round(time.Millisecond), tc.want)
			}
		})
	}
}

// TestKernelOrgFailsFast: this machine has no route to kernel.org, so the
// 7.2.9 pin must fail within the dial timeout with a message naming the URL,
// not hang. On a runner that reaches kernel.org the download starts instead,
// and the test stops it and says so.
func TestKernelOrgFailsFast(t *testing.T) {
	pin, err := Lookup("7.2.9")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*fetchTimeouts.Dial)
	defer cancel()
	b := &Builder{CacheDir: t.TempDir()}
	start := time.Now()
	_, err = b.download(ctx, pin)
	d := time.Since(start)
	if ctx.Err() != nil {
		t.Fatalf("7.2.9 fetch did not fail within %s (the dial timeout is %s): it hangs instead of failing fast", d.Round(time.Second), fetchTimeouts.Dial)
	}
	if err == nil {
		t.Skipf("kernel.org is reachable from here (download ran %s); the fail-fast check applies to machines that cannot reach it", d.Round(time.Second))
	}
	if d > fetchTimeouts.Dial+5*time.Second {
		t.Errorf("7.2.9 fetch failed after %s, want within the %s dial timeout", d, fetchTimeouts.Dial)
	}
	for _, w := range []string{pin.URL, "reachable"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
	t.Logf("failed in %s: %v", d.Round(time.Millisecond), err)
}

// TestDebianURIs: LOCKSTEP_DEBIAN_MIRROR wins over the apt sources; with
// neither, the error names the variable.
func TestDebianURIs(t *testing.T) {
	t.Setenv("LOCKSTEP_DEBIAN_MIRROR", "http://override.example/debian")
	if u, err := debianURIs(); err != nil || !reflect.DeepEqual(u, []string{"http://override.example/debian"}) {
		t.Errorf("debianURIs with LOCKSTEP_DEBIAN_MIRROR = %q, %v", u, err)
	}
	t.Setenv("LOCKSTEP_DEBIAN_MIRROR", "")
	t.Setenv(AptDirEnv, t.TempDir())
	if _, err := debianURIs(); err == nil || !strings.Contains(err.Error(), "LOCKSTEP_DEBIAN_MIRROR") {
		t.Errorf("debianURIs without sources = %v, want an error pointing at LOCKSTEP_DEBIAN_MIRROR", err)
	}
}

// ubuntuOnlyApt writes an apt configuration directory as an Ubuntu runner
// has it: a deb822 .sources signed by Ubuntu's keyring and an older,
// unsigned one-line entry of an Ubuntu suite. No Debian archive in it.
func ubuntuOnlyApt(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "sources.list"), []byte("deb http://archive.invalid/ubuntu jammy main universe\n"))
	if err := os.MkdirAll(filepath.Join(dir, "sources.list.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "sources.list.d", "ubuntu.sources"), []byte(`Types: deb
URIs: http://archive.invalid/ubuntu/
Suites: noble noble-updates noble-backports
Components: main restricted universe multiverse
Signed-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg

Types: deb
URIs: http://security.invalid/ubuntu/
Suites: noble-security
Components: main restricted universe multiverse
Signed-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg
`))
	return dir
}

// TestKernelBuildWithoutDebianSources: on a runner whose apt sources name
// only an Ubuntu-signed archive and no LOCKSTEP_DEBIAN_MIRROR is set, a
// debian pin's build fails in under a second, before any network access,
// naming the variable to set; a malformed mirror is refused as fast.
func TestKernelBuildWithoutDebianSources(t *testing.T) {
	t.Setenv(AptDirEnv, ubuntuOnlyApt(t))
	for _, tc := range []struct{ Mirror, Want string }{
		{"", "set LOCKSTEP_DEBIAN_MIRROR to the URI of a Debian archive mirror"},
		{"archive.invalid/debian", `LOCKSTEP_DEBIAN_MIRROR="archive.invalid/debian": want the http://, https:// or file:// URI`},
	} {
		t.Setenv(MirrorEnv, tc.Mirror)
		b := &Builder{CacheDir: t.TempDir()}
		start := time.Now()
		_, err := b.Build(t.Context(), "7.2.13")
		d := time.Since(start)
		var mt *MissingToolsError
		if errors.As(err, &mt) {
			t.Skipf("this machine lacks the kernel build tools (%v); the source check comes after them", err)
		}
		if err == nil || !strings.Contains(err.Error(), tc.Want) {
			t.Fatalf("Build with mirror %q = %v; want an error with %q", tc.Mirror, err, tc.Want)
		}
		if d > time.Second {
			t.Errorf("Build with mirror %q failed after %s, want under a second", tc.Mirror, d)
		}
		t.Logf("mirror %q: failed in %s: %v", tc.Mirror, d.Round(time.Microsecond), err)
	}
}

// TestKernelFetchThroughMirror: with the same Ubuntu-only sources and
// LOCKSTEP_DEBIAN_MIRROR naming a Debian archive (the one this machine's
// own apt sources name, read at test time), the pinned 7.2.13 source is
// fetched and its SHA-256 checked. It downloads the source package (about
// 160 MB) from that archive.
func TestKernelFetchThroughMirror(t *testing.T) {
	mirrors, err := debianURIs()
	if err != nil {
		t.Skipf("this machine's apt sources name no Debian archive to use as the mirror: %v", err)
	}
	t.Setenv(AptDirEnv, ubuntuOnlyApt(t))
	t.Setenv(MirrorEnv, mirrors[0])
	pin, err := Lookup("7.2.13")
	if err != nil {
		t.Fatal(err)
	}
	b := &Builder{CacheDir: t.TempDir()}
	start := time.Now()
	got, err := b.download(t.Context(), pin)
	if err != nil {
		t.Fatalf("fetch through %s: %v", MirrorEnv, err)
	}
	if err := checkFileSHA256(got, downloadName(pin), pin.SHA256); err != nil {
		t.Fatal(err)
	}
	t.Logf("fetched %s through %s in %s", filepath.Base(got), MirrorEnv, time.Since(start).Round(time.Second))
}

func TestLockFileSerialises(t *testing.T) {
	path := filepath.Join(t.TempDir(), "k.lock")
	unlock, err := lockFile(t.Context(), path, nil2log())
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan time.Time, 1)
	go func() {
		u, err := lockFile(t.Context(), path, nil2log())
		if err != nil {
			t.Error(err)
			got <- time.Time{}
			return
		}
		got <- time.Now()
		u()
	}()
	time.Sleep(600 * time.Millisecond)
	released := time.Now()
	unlock()
	if at := <-got; at.Before(released) {
		t.Errorf("second lock taken at %s, before the first was released at %s", at, released)
	}
	ctx, cancel := context.WithCancel(t.Context())
	unlock, _ = lockFile(t.Context(), path, nil2log())
	defer unlock()
	cancel()
	if _, err := lockFile(ctx, path, nil2log()); !errors.Is(err, context.Canceled) {
		t.Errorf("lockFile on a cancelled context while held = %v, want context.Canceled", err)
	}
}

func nil2log() *slog.Logger { return (&Builder{}).log() }
