package kernel

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lockstep-sandbox/lockstep/internal/debian"
	"github.com/lockstep-sandbox/lockstep/internal/shellquote"
)

// HashError is a downloaded file whose SHA-256 is not the pinned one. It is
// raised before anything is unpacked.
type HashError struct {
	What string // the file, e.g. "linux-7.2.9.tar.xz"
	Want string // pinned SHA-256
	Got  string // actual SHA-256
}

func (e *HashError) Error() string {
	return fmt.Sprintf("%s: sha256 is %s, pin wants %s; nothing was unpacked", e.What, e.Got, e.Want)
}

// fetchTimeouts bound each network step of a URL download, so an unreachable
// host fails in seconds instead of hanging.
// Idle bounds the wait for the body's next bytes: a server that sent its
// headers and then stalled held a fetch forever before.
var fetchTimeouts = struct {
	Dial, TLS, Header, Idle time.Duration
}{Dial: 10 * time.Second, TLS: 10 * time.Second, Header: 30 * time.Second, Idle: 60 * time.Second}

// download returns the path of pin's verified download in the cache,
// fetching it first when absent. A download whose SHA-256 differs from the
// pin's is deleted and reported as *HashError.
func (b *Builder) download(ctx context.Context, pin Pin) (string, error) {
	dir := filepath.Join(b.root(), "downloads")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create download cache: %w", err)
	}
	name := pin.SHA256 + "-" + downloadName(pin)
	final := filepath.Join(dir, name)
	unlock, err := lockFile(ctx, final+".lock", b.log())
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(final); err == nil {
		// Cached downloads are re-hashed: the cache directory is not trusted.
		if err := checkFileSHA256(final, downloadName(pin), pin.SHA256); err != nil {
			return "", fmt.Errorf("cached download %s: %w (delete it to fetch again)", final, err)
		}
		b.log().Info("kernel: source cached", "file", final)
		return final, nil
	}
	b.removeStale(filepath.Join(dir, ".fetch-"+pin.SHA256[:12]+"-*"))
	tmp, err := os.MkdirTemp(dir, ".fetch-"+pin.SHA256[:12]+"-")
	if err != nil {
		return "", fmt.Errorf("create fetch dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	var got string
	switch pin.Source {
	case SourceDebian, SourceDebianImage:
		got, err = b.fetchDebian(ctx, pin, tmp)
	case SourceURL:
		got, err = b.fetchURL(ctx, pin, tmp)
	default:
		err = fmt.Errorf("BUG(kernel): pin %s has source %q", pin.Version, pin.Source)
	}
	if err != nil {
		return "", err
	}
	if err := checkFileSHA256(got, downloadName(pin), pin.SHA256); err != nil {
		return "", err
	}
	if err := os.Rename(got, final); err != nil {
		return "", fmt.Errorf("store download: %w", err)
	}
	return final, nil
}

func downloadName(pin Pin) string {
	switch pin.Source {
	case SourceDebian:
		return fmt.Sprintf("%s_%s_all.deb", pin.Package, strings.ReplaceAll(pin.PackageVersion, ":", "%3a"))
	case SourceDebianImage:
		return fmt.Sprintf("%s_%s_amd64.deb", pin.Package, strings.ReplaceAll(pin.PackageVersion, ":", "%3a"))
	}
	u, _ := url.Parse(pin.URL)
	return path.Base(u.Path)
}

func checkFileSHA256(file, what, want string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("hash %s: %w", file, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return &HashError{What: what, Want: want, Got: got}
	}
	return nil
}

// fetchURL downloads pin.URL into dir and returns the file's path.
func (b *Builder) fetchURL(ctx context.Context, pin Pin, dir string) (string, error) {
	u, err := url.Parse(pin.URL)
	if err != nil {
		return "", fmt.Errorf("pin %s url: %w", pin.Version, err)
	}
	dest := filepath.Join(dir, path.Base(u.Path))
	out, err := os.Create(dest)
	if err != nil {
		return "", err
	}
	defer out.Close()
	var n atomic.Int64
	stop := progress(b.log(), b.interval(), "fetch", func() string { return fmt.Sprintf("%d MB of %s", n.Load()>>20, pin.URL) })
	defer stop()
	var body io.ReadCloser
	if u.Scheme == "file" {
		b.log().Debug("$ " + shellquote.Join([]string{"cp", u.Path, dest}))
		body, err = os.Open(u.Path)
		if err != nil {
			return "", fmt.Errorf("fetch %s: %w", pin.URL, err)
		}
	} else {
		b.log().Debug("$ " + shellquote.Join([]string{"curl", "--fail", "--location", "-o", dest, pin.URL}))
		body, err = httpGet(ctx, pin.URL)
		if err != nil {
			return "", err
		}
	}
	defer body.Close()
	if _, err := io.Copy(io.MultiWriter(out, countWriter{&n}), body); err != nil {
		return "", fmt.Errorf("fetch %s: %w", pin.URL, err)
	}
	return dest, out.Close()
}

func httpGet(ctx context.Context, rawURL string) (io.ReadCloser, error) {
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: fetchTimeouts.Dial}).DialContext,
		TLSHandshakeTimeout:   fetchTimeouts.TLS,
		ResponseHeaderTimeout: fetchTimeouts.Header,
	}
	ctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("fetch %s: %w (is the host reachable from this machine? a pin with source=debian needs only Debian's archive)", rawURL, err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("fetch %s: %s, want 200 OK", rawURL, resp.Status)
	}
	b := &idleBody{body: resp.Body, cancel: cancel, idle: fetchTimeouts.Idle}
	b.timer = time.AfterFunc(b.idle, b.expire)
	return b, nil
}

// idleBody cancels its request when no byte arrives for idle.
type idleBody struct {
	body    io.ReadCloser
	cancel  context.CancelFunc
	idle    time.Duration
	timer   *time.Timer
	expired atomic.Bool
}

func (b *idleBody) expire() {
	b.expired.Store(true)
	b.cancel()
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if n > 0 {
		b.timer.Reset(b.idle)
	}
	if err != nil && err != io.EOF && b.expired.Load() {
		err = fmt.Errorf("no data for %s: %w", b.idle, err)
	}
	return n, err
}

func (b *idleBody) Close() error {
	b.timer.Stop()
	err := b.body.Close()
	b.cancel()
	return err
}

type countWriter struct{ n *atomic.Int64 }

func (c countWriter) Write(p []byte) (int, error) { c.n.Add(int64(len(p))); return len(p), nil }

// DebianKeyring is the keyring the temporary sources list trusts.
const DebianKeyring = "/usr/share/keyrings/debian-archive-keyring.gpg"

// MirrorEnv names the variable that gives the Debian archive URI a debian
// pin is fetched from when this machine's apt sources name none (a runner
// whose archive is another distribution's). In GitHub Actions it is the
// repository variable of the same name, which workflows/kernel passes on.
const MirrorEnv = "LOCKSTEP_DEBIAN_MIRROR"

// AptDirEnv names the variable that points the search for Debian archive
// URIs at another apt configuration directory than /etc/apt (a simulated
// foreign runner; tests).
const AptDirEnv = "LOCKSTEP_APT_DIR"

// aptSourcesDir is where the machine's apt sources are read from.
func aptSourcesDir() string {
	if d := os.Getenv(AptDirEnv); d != "" {
		return d
	}
	return "/etc/apt"
}

// fetchDebian runs `apt-get update` and `apt-get download` against a
// temporary sources list in dir that names this machine's Debian archive
// URIs with the pin's suite, and returns the .deb's path. The machine's own
// apt configuration is only read.
func (b *Builder) fetchDebian(ctx context.Context, pin Pin, dir string) (string, error) {
	a, err := b.aptUpdate(ctx, pin.Suite, dir)
	if err != nil {
		return "", err
	}
	spec := pin.Package + "=" + pin.PackageVersion
	if err := a.download(ctx, spec); err != nil {
		return "", err
	}
	got := filepath.Join(a.dl(), downloadName(pin))
	if _, err := os.Stat(got); err != nil {
		return "", fmt.Errorf("apt-get download %s left no %s: %w", spec, downloadName(pin), err)
	}
	return got, nil
}

// aptTemp is apt run against a temporary directory of its own: sources
// list, lists, cache and status; downloads land in its dl/.
type aptTemp struct {
	b     *Builder
	dir   string
	suite string
	opts  []string
	log   *lastLineWriter
}

func (a *aptTemp) dl() string { return filepath.Join(a.dir, "dl") }

// aptUpdate writes a sources list in dir naming this machine's Debian
// archive URIs with suite, and runs `apt-get update` against it.
func (b *Builder) aptUpdate(ctx context.Context, suite, dir string) (*aptTemp, error) {
	uris, err := debianURIs()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(DebianKeyring); err != nil {
		return nil, fmt.Errorf("apt sources for suite %s: %w (install debian-archive-keyring)", suite, err)
	}
	for _, d := range []string{"lists/partial", "cache/archives/partial", "sources.list.d", "preferences.d", "dl"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	var list strings.Builder
	for _, u := range uris {
		fmt.Fprintf(&list, "deb [signed-by=%s] %s %s main\n", DebianKeyring, u, suite)
	}
	if err := os.WriteFile(filepath.Join(dir, "sources.list"), []byte(list.String()), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "status"), nil, 0o644); err != nil {
		return nil, err
	}
	a := &aptTemp{b: b, dir: dir, suite: suite, log: &lastLineWriter{w: io.Discard}, opts: []string{
		"-q",
		"-o", "Dir::Etc::SourceList=" + filepath.Join(dir, "sources.list"),
		"-o", "Dir::Etc::SourceParts=" + filepath.Join(dir, "sources.list.d"),
		"-o", "Dir::Etc::PreferencesParts=" + filepath.Join(dir, "preferences.d"),
		"-o", "Dir::Etc::Preferences=" + filepath.Join(dir, "preferences"),
		"-o", "Dir::State::Lists=" + filepath.Join(dir, "lists"),
		"-o", "Dir::State::status=" + filepath.Join(dir, "status"),
		"-o", "Dir::Cache=" + filepath.Join(dir, "cache"),
		"-o", "Acquire::Check-Valid-Until=false",
		"-o", "Acquire::Languages=none",
		"-o", "APT::Sandbox::User=root",
	}}
	stop := progress(b.log(), b.interval(), "fetch", func() string { return "apt-get update (suite " + suite + ")" })
	err = a.cmd().run(ctx, "apt-get", append(a.opts, "update")...)
	stop()
	if err != nil {
		return nil, fmt.Errorf("apt-get update for suite %s: %w\n%s", suite, err, a.log.Tail())
	}
	return a, nil
}

func (a *aptTemp) cmd() command {
	return command{log: a.b.log(), dir: a.dl(), stdout: a.log, stderr: a.log}
}

// download runs `apt-get download spec` into dl/.
func (a *aptTemp) download(ctx context.Context, spec string) error {
	stop := progress(a.b.log(), a.b.interval(), "fetch", func() string {
		return fmt.Sprintf("apt-get download %s: %d MB", spec, dirBytes(a.dl())>>20)
	})
	err := a.cmd().run(ctx, "apt-get", append(a.opts, "download", spec)...)
	stop()
	if err != nil {
		return fmt.Errorf("apt-get download %s from suite %s: %w\n%s", spec, a.suite, err, a.log.Tail())
	}
	return nil
}

func dirBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// DebianURIs returns the Debian archive URIs a debian pin is fetched from:
// $LOCKSTEP_DEBIAN_MIRROR when set, else those of this machine's apt sources
// (debian.ArchiveURIs). Neither is an error that says what to set: it comes
// before any network access, in well under a second.
func DebianURIs() ([]string, error) { return debianURIs() }

func debianURIs() ([]string, error) {
	if m := os.Getenv(MirrorEnv); m != "" {
		if err := checkMirror(m); err != nil {
			return nil, err
		}
		return []string{strings.TrimRight(m, "/")}, nil
	}
	dir := aptSourcesDir()
	sources, err := debian.ReadAptSources(dir)
	if err != nil {
		return nil, err
	}
	uris := debian.ArchiveURIs(sources)
	if len(uris) == 0 {
		return nil, &NoMirrorError{AptDir: dir}
	}
	return uris, nil
}

// NoMirrorError is a debian pin to fetch on a machine whose apt sources name
// no Debian archive (an Ubuntu runner) and no LOCKSTEP_DEBIAN_MIRROR.
type NoMirrorError struct{ AptDir string }

func (e *NoMirrorError) Error() string {
	return fmt.Sprintf("no Debian archive in the apt sources of %s (sources.list, sources.list.d/*.list and *.sources; "+
		"an entry counts when it is signed by the Debian archive keyring, or names no key and a Debian suite): "+
		"set %s to the URI of a Debian archive mirror, e.g. http://<mirror>/debian "+
		"(in GitHub Actions: the repository variable %s, which workflows/kernel passes on)", e.AptDir, MirrorEnv, MirrorEnv)
}

// checkMirror refuses a LOCKSTEP_DEBIAN_MIRROR that apt could not use.
func checkMirror(m string) error {
	u, err := url.Parse(m)
	if err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
		return nil
	}
	if err == nil && u.Scheme == "file" && u.Path != "" {
		return nil
	}
	return fmt.Errorf("%s=%q: want the http://, https:// or file:// URI of a Debian archive, e.g. http://<mirror>/debian", MirrorEnv, m)
}

// extractDebMember copies member (a path inside the package's data tarball)
// out of the .deb into dest via `dpkg-deb --fsys-tarfile`, and returns its
// SHA-256.
func (b *Builder) extractDebMember(ctx context.Context, deb, member, dest string) (string, error) {
	pr, pw := io.Pipe()
	c := command{log: b.log(), stdout: pw}
	var stderr strings.Builder
	c.stderr = &stderr
	errc := make(chan error, 1)
	go func() {
		err := c.run(ctx, "dpkg-deb", "--fsys-tarfile", deb)
		pw.CloseWithError(err)
		errc <- err
	}()
	sum, found, err := copyTarMember(pr, member, dest)
	pr.CloseWithError(errors.New("done"))
	runErr := <-errc
	if err != nil {
		return "", fmt.Errorf("read %s from %s: %w", member, deb, err)
	}
	if !found {
		if runErr != nil {
			return "", fmt.Errorf("dpkg-deb --fsys-tarfile %s: %w: %s", deb, runErr, strings.TrimSpace(stderr.String()))
		}
		return "", fmt.Errorf("%s has no member %s", deb, member)
	}
	return sum, nil
}

// copyTarMember writes the tar member named member (leading "./" ignored)
// to dest, hashing it.
func copyTarMember(r io.Reader, member, dest string) (sum string, found bool, err error) {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return "", false, nil
		}
		if err != nil {
			return "", false, err
		}
		if strings.TrimPrefix(h.Name, "./") != member || h.Typeflag != tar.TypeReg {
			continue
		}
		out, err := os.Create(dest)
		if err != nil {
			return "", true, err
		}
		hs := sha256.New()
		if _, err := io.Copy(io.MultiWriter(out, hs), tr); err != nil {
			out.Close()
			return "", true, err
		}
		return hex.EncodeToString(hs.Sum(nil)), true, out.Close()
	}
}
