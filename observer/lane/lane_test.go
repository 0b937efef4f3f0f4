package lane

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// TestMain lets the test binary be the role, as lockstep is.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == Verb {
		os.Exit(Main(os.Args[2:], os.Stderr))
	}
	os.Exit(m.Run())
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("lanes need root (CAP_SYS_ADMIN)")
	}
}

// laneRun runs script with bash in a lane over work from copy, on cpus
// when not empty.
func laneRun(t *testing.T, copy, work string, cpus []int, script string) (string, error) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	argv := append(Command([]string{self}, copy, work, cpus), "/bin/bash", "-euc", script)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = work
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestLanesSideBySide: three lanes at once over one working directory, each
// with its own copy: each sees its copy at the working directory's path
// (and runs there), writes land in its copy alone, and each binds
// 127.0.0.1:5000/udp and ::1 in its own network namespace while this
// process holds that port in its own.
func TestLanesSideBySide(t *testing.T) {
	needRoot(t)
	work := filepath.Join(t.TempDir(), "testing-dir")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	held, err := exec.Command("python3", "-c", "").CombinedOutput()
	if err != nil {
		t.Skipf("python3 is needed to bind the port: %v: %s", err, held)
	}
	// This namespace's own bind of the port, held throughout.
	hold := exec.Command("python3", "-c", "import socket,sys; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(('127.0.0.1', 5000)); print('held', flush=True); sys.stdin.read()")
	stdin, err := hold.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := hold.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := hold.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); hold.Wait() }()
	buf := make([]byte, 5)
	if _, err := io.ReadFull(out, buf); err != nil || string(buf) != "held\n" {
		t.Fatalf("the holder of port 5000 did not start: %q %v", buf, err)
	}

	const script = `test "$(pwd)" = "$LANE_WORK"; cat marker; echo ran > out.txt
python3 -c "import socket
for fam, host in ((socket.AF_INET, '127.0.0.1'), (socket.AF_INET6, '::1')):
    s = socket.socket(fam, socket.SOCK_DGRAM); s.bind((host, 5000)); s.close()
print('bound')"`
	t.Setenv("LANE_WORK", work)
	var wg sync.WaitGroup
	outs, errs := make([]string, 3), make([]error, 3)
	copies := make([]string, 3)
	for i := range copies {
		copies[i] = t.TempDir()
		if err := os.WriteFile(filepath.Join(copies[i], "marker"), []byte{byte('a' + i), '\n'}, 0o644); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = laneRun(t, copies[i], work, nil, script)
		}()
	}
	wg.Wait()
	for i := range copies {
		if errs[i] != nil {
			t.Fatalf("lane %d: %v: %s", i, errs[i], outs[i])
		}
		if want := string(rune('a'+i)) + "\nbound\n"; outs[i] != want {
			t.Errorf("lane %d printed %q, want %q", i, outs[i], want)
		}
		if b, err := os.ReadFile(filepath.Join(copies[i], "out.txt")); err != nil || string(b) != "ran\n" {
			t.Errorf("lane %d's write did not land in its copy: %q %v", i, b, err)
		}
	}
	if ents, _ := os.ReadDir(work); len(ents) != 0 {
		t.Errorf("the working directory itself got %d entries; the lanes' writes belong in their copies", len(ents))
	}
}

// TestLaneSetupFailure: a copy that does not exist stops the lane before
// the command, with SetupStatus and a message naming the bind.
func TestLaneSetupFailure(t *testing.T) {
	needRoot(t)
	work := t.TempDir()
	out, err := laneRun(t, filepath.Join(work, "missing"), work, nil, "echo ran")
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != SetupStatus {
		t.Fatalf("got %v, want exit status %d: %s", err, SetupStatus, out)
	}
	if strings.Contains(out, "ran") || !strings.Contains(out, "binding") {
		t.Errorf("output %q: want the bind's failure and no run", out)
	}
}

// TestCommand pins the prefix word for word.
func TestCommand(t *testing.T) {
	got := strings.Join(Command([]string{"/bin/lockstep"}, "/tmp/l/1", "/var/tmp/testing-dir", nil), " ")
	if want := "/bin/lockstep lane-run --from /tmp/l/1 --at /var/tmp/testing-dir --"; got != want {
		t.Errorf("Command = %q, want %q", got, want)
	}
	got = strings.Join(Command([]string{"/bin/lockstep"}, "/tmp/l/1", "/var/tmp/testing-dir", []int{1, 3}), " ")
	if want := "/bin/lockstep lane-run --from /tmp/l/1 --at /var/tmp/testing-dir --cpus 1,3 --"; got != want {
		t.Errorf("Command = %q, want %q", got, want)
	}
}

// TestLaneCPUs: a lane given --cpus runs its command on those CPUs only,
// whatever the CPUs of the process that started it.
func TestLaneCPUs(t *testing.T) {
	needRoot(t)
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs")
	}
	work, copy := t.TempDir(), t.TempDir()
	last := runtime.NumCPU() - 1
	out, err := laneRun(t, copy, work, []int{last}, "grep Cpus_allowed_list /proc/self/status")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got, want := strings.Fields(out), []string{"Cpus_allowed_list:", strconv.Itoa(last)}; !slices.Equal(got, want) {
		t.Errorf("the lane's command: %q, want %q", got, want)
	}
	out, err = laneRun(t, copy, work, nil, "grep Cpus_allowed_list /proc/self/status")
	if err != nil || strings.Fields(out)[1] == strconv.Itoa(last) {
		t.Errorf("without --cpus the lane's command must keep every CPU: %v: %s", err, out)
	}
}

// TestParseCPUs reads --cpus values and names what a bad one wants.
func TestParseCPUs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		err  bool
	}{
		{"", nil, false}, {"1", []int{1}, false}, {"1,3", []int{1, 3}, false},
		{"1-3", nil, true}, {"x", nil, true}, {"-1", nil, true}, {"1,", nil, true}, {"1024", nil, true},
	} {
		got, err := ParseCPUs(tc.in)
		if (err != nil) != tc.err || !slices.Equal(got, tc.want) {
			t.Errorf("ParseCPUs(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.err)
		}
		if err != nil && !strings.Contains(err.Error(), "comma-separated") {
			t.Errorf("ParseCPUs(%q): %v does not say what is wanted", tc.in, err)
		}
	}
	if f := FormatCPUs([]int{0, 2}); f != "0,2" {
		t.Errorf("FormatCPUs = %q", f)
	}
}
