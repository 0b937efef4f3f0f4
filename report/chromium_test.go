package report

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lockstep-sandbox/lockstep/repro"
	"github.com/lockstep-sandbox/lockstep/verify"
)

var update = flag.Bool("update", false, "rewrite docs/report.png from the screenshot")

// chromium returns Debian's chromium, or skips naming the package.
func chromium(t *testing.T) string {
	t.Helper()
	for _, n := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	t.Skip("no chromium on PATH: apt-get install -y chromium")
	return ""
}

// headless runs chromium headless on file with a fresh profile, no network
// services, and one extra mode argument (--dump-dom, --screenshot=…); it
// returns stdout and the console messages chromium logged on stderr.
func headless(t *testing.T, bin, file string, mode ...string) (dom string, console []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(), "--enable-logging=stderr", "--v=0", "--window-size=1280,1500"}, mode...)
	args = append(args, "file://"+file)
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, tailLines(errb.String(), 20))
	}
	return out.String(), consoleMessages(errb.String())
}

// consoleRE matches chromium's log line for a page's console message and
// for a resource the page failed to load.
var consoleRE = regexp.MustCompile(`(?i)(CONSOLE\(\d+\)|Uncaught|Refused to|Failed to load|net::ERR_)`)

func consoleMessages(stderr string) []string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if consoleRE.MatchString(l) {
			out = append(out, l)
		}
	}
	return out
}

func tailLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// TestConsoleCheckCatches is the control for the console check: a page
// that logs an error and fetches a missing file must be caught.
func TestConsoleCheckCatches(t *testing.T) {
	bin := chromium(t)
	f := filepath.Join(t.TempDir(), "bad.html")
	page := `<!DOCTYPE html><html><body><img src="missing.png"><script>console.error("deliberate"); undefinedCall();</script></body></html>`
	if err := os.WriteFile(f, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	_, console := headless(t, bin, f, "--dump-dom")
	if len(console) == 0 {
		t.Fatal("the console check saw nothing on a page that logs an error and throws")
	}
}

func reproResult(t *testing.T) *repro.Result {
	t.Helper()
	b, err := os.ReadFile("testdata/repro-host-7.2.13-udp-bind.json")
	if err != nil {
		t.Fatal(err)
	}
	var res repro.Result
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	return &res
}

// TestReproReportInChromium renders the real host × 7.2.13 UDP repro and
// loads it in headless Chromium: no console errors, the verdict, the
// matrix, the joined pair, the granting row, the chart and the provenance
// are in the DOM; the screenshot shows the colours.
func TestReproReportInChromium(t *testing.T) {
	bin := chromium(t)
	page, err := Repro(reproResult(t), Meta{Title: "lockstep repro: UDP bind on port 5000", Started: time.Date(2026, 11, 29, 9, 55, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(page, []byte("http://")) || bytes.Contains(page, []byte("https://")) {
		t.Errorf("the page names a network address; it must be self-contained")
	}
	dir := t.TempDir()
	f := filepath.Join(dir, "repro.html")
	if err := os.WriteFile(f, page, 0o644); err != nil {
		t.Fatal(err)
	}
	dom, console := headless(t, bin, f, "--dump-dom")
	if len(console) > 0 {
		t.Errorf("console messages: %q", console)
	}
	for _, want := range []string{`id="verdict">differ<`, `id="matrix"`, `cell fail`, `blockers=net.bind_udp`, `↔ matched`,
		`[bind] allow 5000 udp`, `id="timings"`, `<rect class="ph-boot"`, `id="provenance"`, `bzImage sha256`, `tcg`} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered DOM lacks %q", want)
		}
	}
	shot := filepath.Join(dir, "report.png")
	headless(t, bin, f, "--screenshot="+shot, "--hide-scrollbars")
	checkScreenshot(t, shot)
}

// checkScreenshot decodes the PNG and wants the verdict colours in it: the
// red of a failing cell and the green of a matched join.
func checkScreenshot(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot %s: %v", path, err)
	}
	want := map[string]color.RGBA{"red": {0xc6, 0x28, 0x28, 0xff}, "green": {0x2e, 0x85, 0x40, 0xff}, "blue": {0x4a, 0x78, 0xc2, 0xff}}
	found := map[string]int{}
	bnds := img.Bounds()
	for y := bnds.Min.Y; y < bnds.Max.Y; y++ {
		for x := bnds.Min.X; x < bnds.Max.X; x++ {
			for name, c := range want {
				if near(img, x, y, c) {
					found[name]++
				}
			}
		}
	}
	for name := range want {
		if found[name] < 50 {
			t.Errorf("screenshot %dx%d has %d %s pixels, want the verdict colours shown", bnds.Dx(), bnds.Dy(), found[name], name)
		}
	}
}

func near(img image.Image, x, y int, c color.RGBA) bool {
	r, g, b, _ := img.At(x, y).RGBA()
	d := func(a uint32, b uint8) int { v := int(a>>8) - int(b); return v * v }
	return d(r, c.R)+d(g, c.G)+d(b, c.B) < 300
}

// TestObserveReportInChromium renders a real observe run's files (pin
// 7.2.13; the exercise failed in its ABI-10 phase) and loads the page.
func TestObserveReportInChromium(t *testing.T) {
	bin := chromium(t)
	page, err := ObserveDir("testdata/observe-fixture-7.2.13", Meta{Started: time.Date(2026, 11, 29, 9, 51, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "observe.html")
	if err := os.WriteFile(f, page, 0o644); err != nil {
		t.Fatal(err)
	}
	dom, console := headless(t, bin, f, "--dump-dom")
	if len(console) > 0 {
		t.Errorf("console messages: %q", console)
	}
	for _, want := range []string{`id="verdict">fail<`, `cell fail`, `udp-fixture`, `18 strace refusal(s), 18 audit record(s); 18 matched`,
		`more than a UDP bind port`, `id="timings"`, `bzImage sha256`, `received`} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered DOM lacks %q", want)
		}
	}
}

// TestVerifyReportInChromium renders a real verify matrix (2 kernel rows ×
// 2 exercises, one broken on purpose) and loads it; the screenshot of this
// page is docs/report.png.
func TestVerifyReportInChromium(t *testing.T) {
	bin := chromium(t)
	b, err := os.ReadFile("testdata/verify-7.2.13-generic.json")
	if err != nil {
		t.Fatal(err)
	}
	var res verify.Result
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	page, err := Verify(&res, Meta{Started: time.Date(2026, 11, 29, 10, 5, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f := filepath.Join(dir, "verify.html")
	if err := os.WriteFile(f, page, 0o644); err != nil {
		t.Fatal(err)
	}
	dom, console := headless(t, bin, f, "--dump-dom")
	if len(console) > 0 {
		t.Errorf("console messages: %q", console)
	}
	for _, want := range []string{`id="verdict">fail<`, `id="matrix"`, `cell pass`, `cell fail`, `/srv/lockstep-verify-cache`,
		`↔ matched`, `containment: canary`, `joint run 1`, `id="timings"`, `policy hash`} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered DOM lacks %q", want)
		}
	}
	shot := filepath.Join(dir, "report.png")
	headless(t, bin, f, "--screenshot="+shot, "--hide-scrollbars")
	checkScreenshot(t, shot)
	if *update {
		b, err := os.ReadFile(shot)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("..", "docs", "report.png"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
