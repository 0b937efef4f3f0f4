package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/internal/featuretest"
	"github.com/lockstep-sandbox/lockstep/internal/lockstepbin"
	"golang.org/x/sys/unix"
)

// metadataOps tries, on each path it is given, what Landlock does not
// restrict (a file's metadata) and prints one line per path: the path,
// then "op ok" or "op <errno name>" for each.
const metadataOps = `
import errno, os, sys
cap = bytes.fromhex("0000000200000000000000000000000000000000")  # VFS_CAP_REVISION_2, no capability
ops = [("chmod-04755", lambda p: os.chmod(p, 0o4755)),
       ("chmod-0666", lambda p: os.chmod(p, 0o666)),
       ("chown", lambda p: os.chown(p, 65534, 65534)),
       ("setxattr-security.capability", lambda p: os.setxattr(p, "security.capability", cap)),
       ("setxattr-user", lambda p: os.setxattr(p, "user.lockstep", b"x")),
       ("utime", lambda p: os.utime(p, (0, 0)))]
for p in sys.argv[1:]:
    res = []
    for name, op in ops:
        if os.environ.get("OPS") and name not in os.environ["OPS"].split(","):
            continue
        try:
            op(p)
            res.append(name + " ok")
        except OSError as e:
            res.append(name + " " + errno.errorcode[e.errno])
    print(p, ";".join(res))
`

// fileState is what the metadata operations would change.
func fileState(t *testing.T, path string) string {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1024)
	n, err := unix.Listxattr(path, buf)
	if err != nil {
		n = 0
	}
	return fmt.Sprintf("mode %o uid %d gid %d mtime %d xattrs %q", st.Mode, st.Uid, st.Gid, st.Mtim.Sec, buf[:n])
}

// TestRunCannotChangeHostMetadata: a command granted only a work dir
// cannot chmod (set-user-ID, world-writable), chown, setxattr
// (security.capability, user.*) or utime a file outside its grants: every
// mount but the work dir is read-only (EROFS), and the file is unchanged.
// In the work dir all of it works. As root, and as an unprivileged uid on
// a file it owns (a user namespace gives the init the mounts). Landlock
// restricts none of these: before, every one succeeded and persisted.
func TestRunCannotChangeHostMetadata(t *testing.T) {
	py := needPython(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root (and runs the unprivileged case as uid 65534)")
	}
	bin := lockstepbin.Build(t)
	for _, tc := range []struct {
		name string
		uid  int
		ops  string
	}{
		{"root", 0, ""},
		// A non-root uid may chmod, utime and set user.* xattrs on its own files.
		{"uid 65534", 65534, "chmod-0666,setxattr-user,utime"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			openToAll(t, d)
			work, outside := filepath.Join(d, "work"), filepath.Join(d, "outside")
			for _, dir := range []string{work, outside} {
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			inFile, outFile := filepath.Join(work, "f"), filepath.Join(outside, "f")
			for _, f := range []string{work, inFile, outFile} {
				if f != work {
					if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.Chown(f, tc.uid, tc.uid); err != nil {
					t.Fatal(err)
				}
			}
			cfg := filepath.Join(d, "p.cfg")
			policy := truePolicy + fmt.Sprintf("[read]\n%s\n[write]\n%s\n[create]\n%s\n[delete]\n%s\n", d, work, work, work)
			if err := os.WriteFile(cfg, []byte(policy), 0o644); err != nil {
				t.Fatal(err)
			}
			lbin := filepath.Join(d, "lockstep")
			if err := copyFile(bin, lbin); err != nil {
				t.Fatal(err)
			}
			before := fileState(t, outFile)
			cmd := exec.Command(lbin, "run", "--config", cfg, "--env", "OPS", "--", py, "-S", "-c", metadataOps, outFile, inFile)
			cmd.Env = append(os.Environ(), "OPS="+tc.ops)
			if tc.uid != 0 {
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(tc.uid), Gid: uint32(tc.uid)}}
			}
			cmd.Dir = d // the checkout may be closed to uid 65534 (a 0700 clone)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Run(); err != nil {
				t.Fatalf("lockstep run: %v\nstdout %s\nstderr %s", err, out.String(), errb.String())
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if len(lines) != 2 {
				t.Fatalf("stdout %q: want a line for each file", out.String())
			}
			for _, r := range strings.Split(strings.TrimPrefix(lines[0], outFile+" "), ";") {
				if !strings.HasSuffix(r, " EROFS") {
					t.Errorf("outside the grants: %s; want EROFS", r)
				}
			}
			for _, r := range strings.Split(strings.TrimPrefix(lines[1], inFile+" "), ";") {
				if !strings.HasSuffix(r, " ok") {
					t.Errorf("in the work dir: %s; want ok", r)
				}
			}
			if after := fileState(t, outFile); after != before {
				t.Errorf("the file outside the grants changed: %s, was %s", after, before)
			}
		})
	}
}

// openToAll lets every uid into d and the test's directory above it
// (t.TempDir makes both 0700).
func openToAll(t *testing.T, d string) {
	t.Helper()
	for _, p := range []string{filepath.Dir(d), d} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o755)
}

// reachProcs tries prlimit, setpriority and sched_setscheduler, each
// leaving the value as it is, on every pid it is given, and prints
// "<pid> <call> ok|<errno name>".
const reachProcs = `
import errno, os, resource, sys
for p in map(int, sys.argv[1:]):
    for name, op in [("prlimit", lambda: resource.prlimit(p, resource.RLIMIT_NOFILE)),
                     ("setpriority", lambda: os.setpriority(os.PRIO_PROCESS, p, os.getpriority(os.PRIO_PROCESS, p))),
                     ("sched_setscheduler", lambda: os.sched_setscheduler(p, os.sched_getscheduler(p), os.sched_getparam(p)))]:
        try:
            op()
            print(p, name, "ok")
        except OSError as e:
            print(p, name, errno.errorcode[e.errno])
`

// TestRunCannotReachOtherProcesses: the command cannot name lockstep or
// any other process outside its PID namespace: setpriority and
// sched_setscheduler on lockstep's pid and on a sleep beside it fail with
// ESRCH; prlimit too, or with EPERM where the system-call filter refuses
// it first (it refuses prlimit of any pid but 0). And the
// attack this allowed: a command that lowers RLIMIT_NOFILE to 3 on every
// lockstep process it finds in /proc (lockstep, its cgroup reaper), then
// starts a `setsid -f` daemon and outlasts its timeout, leaves nothing
// running once lockstep exits 124, nor does a daemon of a command that
// exits at once. Before, prlimit reached lockstep, which then could open
// no cgroup file, took the cgroup for empty, and the daemon lived on.
func TestRunCannotReachOtherProcesses(t *testing.T) {
	py := needPython(t)
	bin := lockstepbin.Build(t)
	d := t.TempDir()
	sibling := exec.Command("/usr/bin/sleep", "3611")
	if err := sibling.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sibling.Process.Kill(); sibling.Wait() }()
	cfg := filepath.Join(d, "p.cfg")
	if err := os.WriteFile(cfg, []byte(truePolicy+"[read]\n/proc\n/bin\n/dev/null\n[write]\n/dev/null\n[execute]\n/bin\n[limits]\ntimeout=2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Run("prlimit and setpriority", func(t *testing.T) {
		// $$ of the shell is lockstep's pid once it execs lockstep.
		out, err := exec.Command("/bin/sh", "-c", `exec "$0" run -q --config "$1" -- "$2" -S -c "$3" $$ "$4"`,
			bin, cfg, py, reachProcs, strconv.Itoa(sibling.Process.Pid)).CombinedOutput()
		if err != nil {
			t.Fatalf("lockstep run: %v\n%s", err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != 6 {
			t.Fatalf("output %q: want 6 lines", out)
		}
		for _, l := range lines {
			if strings.HasSuffix(l, " ESRCH") || strings.Contains(l, " prlimit ") && strings.HasSuffix(l, " EPERM") {
				continue
			}
			t.Errorf("%s; want ESRCH (no such process in the command's PID namespace)", l)
		}
	})
	for _, tc := range []struct {
		name, tail string
		want       int
	}{
		{"exits at once", "exit 0", 0},
		{"timeout", "sleep 30", 124},
	} {
		t.Run("setsid daemon/"+tc.name, func(t *testing.T) {
			marker := fmt.Sprintf("36%d.%d", os.Getpid()%1000, time.Now().UnixNano()%1_000_000)
			defer func() {
				for _, pid := range withMarker(marker) {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}()
			script := fmt.Sprintf(`for p in /proc/[0-9]*; do
  [ "${p#/proc/}" = $$ ] && continue
  grep -qF "%s" "$p/cmdline" 2>/dev/null && prlimit --nofile=3:3 --pid "${p#/proc/}" && echo "lowered ${p#/proc/}"
done
setsid -f /usr/bin/sleep %s </dev/null >/dev/null 2>&1
%s`, bin, marker, tc.tail)
			code, out, errs := runBin(t, bin, nil, "run", "-q", "--config", cfg, "--", "/bin/sh", "-c", script)
			if code != tc.want {
				t.Errorf("lockstep run = %d, want %d\nstdout %s\nstderr %s", code, tc.want, out, errs)
			}
			if !eventually(2*time.Second, func() bool { return len(withMarker(marker)) == 0 }) {
				t.Errorf("the setsid daemon outlived lockstep run (pids %v)\nstdout %s\nstderr %s", withMarker(marker), out, errs)
			}
		})
	}
}

// shmOverwrite attaches the System V shared memory segment argv[1] and
// writes to it, or prints shmat's errno.
const shmOverwrite = `
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
addr = libc.shmat(int(sys.argv[1]), None, 0)
if addr is None or addr == ctypes.c_void_p(-1).value:
    print("shmat errno", ctypes.get_errno())
else:
    ctypes.memmove(addr, b"overwritten", 11)
    print("attached and wrote")
`

// TestRunHasOwnSysVIPC: a System V shared memory segment of the host is
// not there for the command (its IPC namespace is its own): shmat of its
// id fails with EINVAL and the segment keeps its bytes. Before, the
// command attached it and overwrote it.
func TestRunHasOwnSysVIPC(t *testing.T) {
	py := needPython(t)
	bin := lockstepbin.Build(t)
	id, err := unix.SysvShmGet(unix.IPC_PRIVATE, 4096, unix.IPC_CREAT|0o666)
	if err != nil {
		t.Skipf("no System V shared memory here: %v", err)
	}
	defer unix.SysvShmCtl(id, unix.IPC_RMID, nil)
	mem, err := unix.SysvShmAttach(id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.SysvShmDetach(mem)
	copy(mem, "host data")
	cfg := filepath.Join(t.TempDir(), "p.cfg")
	if err := os.WriteFile(cfg, []byte(truePolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runBin(t, bin, nil, "run", "-q", "--config", cfg, "--", py, "-S", "-c", shmOverwrite, strconv.Itoa(id))
	if code != 0 || strings.TrimSpace(out) != "shmat errno 22" {
		t.Errorf("shmat of the host's segment %d under lockstep run = %d, %q (stderr %q); want shmat errno 22 (EINVAL: no such segment in the command's IPC namespace)", id, code, out, errs)
	}
	if !bytes.HasPrefix(mem, []byte("host data")) {
		t.Errorf("the host's segment now holds %q", mem[:16])
	}
}

// memfdExec copies /usr/bin/true into a memfd and executes it through
// /proc/self/fd; a second memfd asks for MFD_EXEC outright. It prints
// what each step gave.
const memfdExec = `
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
MFD_EXEC = 0x10
if libc.memfd_create(b"y", MFD_EXEC) < 0:
    print("memfd_create MFD_EXEC", errno.errorcode[ctypes.get_errno()])
fd = os.memfd_create("x", 0)
os.write(fd, open("/usr/bin/true", "rb").read())
try:
    os.fchmod(fd, 0o755)
except OSError as e:
    print("fchmod", errno.errorcode[e.errno])
try:
    os.execv("/proc/self/fd/%d" % fd, ["true"])
except OSError as e:
    print("exec", errno.errorcode[e.errno])
`

// TestRunMemfdExecRefused: bytes written to a memfd cannot be executed
// past [execute] (Landlock does not check files of internal mounts):
// vm.memfd_noexec=2 in the command's PID namespace seals every memfd
// against execution and refuses MFD_EXEC. Before, the memfd copy of true
// ran (exit 0, nothing printed). Needs a kernel with memfd_noexec (6.3+).
func TestRunMemfdExecRefused(t *testing.T) {
	_, err := os.Stat("/proc/sys/vm/memfd_noexec")
	featuretest.SkipIfNotSupported(t, featuretest.MemfdNoexec, err)
	if os.Geteuid() != 0 {
		t.Skip("vm.memfd_noexec is written by root in the initial user namespace only")
	}
	py := needPython(t)
	bin := lockstepbin.Build(t)
	cfg := filepath.Join(t.TempDir(), "p.cfg")
	if err := os.WriteFile(cfg, []byte(truePolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runBin(t, bin, nil, "run", "-q", "--config", cfg, "--", py, "-S", "-c", memfdExec)
	want := "memfd_create MFD_EXEC EACCES\nfchmod EPERM\nexec EACCES\n"
	if code != 0 || out != want {
		t.Errorf("memfd exec under lockstep run = %d, stdout %q, stderr %q; want %q", code, out, errs, want)
	}
}

// TestRunWithoutLayers: --without switches layers off and the status line
// names them (without=): with --without mounts (what the observer and the
// pruner run with) a write outside the grants is Landlock's EACCES again,
// not EROFS; --without pid leaves the command among the host's processes.
// --exec has no layer and says so. An unknown layer is a usage error.
func TestRunWithoutLayers(t *testing.T) {
	bin := lockstepbin.Build(t)
	d := t.TempDir()
	cfg := filepath.Join(d, "p.cfg")
	target := filepath.Join(d, "f")
	if err := os.WriteFile(cfg, []byte(truePolicy+"[read]\n/proc\n/bin\n[execute]\n/bin\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(target, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	write := fmt.Sprintf(`echo x > %s`, target)
	for _, tc := range []struct {
		name, without, cmd, wantErr, wantStatus string
	}{
		{"every layer", "", write, "Read-only file system", ""},
		{"without mounts", "mounts", write, "Permission denied", " without=mounts"},
		{"without pid", "pid", `[ -d /proc/1 ] && [ "$$" != 2 ] && echo host pids`, "", " without=pid,memfd"},
		{"every layer's pids", "", `[ "$$" = 2 ] && [ "$(ls -d /proc/[0-9]* | wc -l)" -le 5 ] && echo own pids`, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"run", "--config", cfg}
			if tc.without != "" {
				args = append(args, "--without", tc.without)
			}
			code, out, errs := runBin(t, bin, nil, append(args, "--", "/bin/sh", "-c", tc.cmd)...)
			status, _, _ := strings.Cut(errs, "\n")
			switch {
			case tc.wantStatus != "" && !strings.HasSuffix(status, tc.wantStatus),
				tc.wantStatus == "" && strings.Contains(status, "without="),
				strings.Contains(status, "unisolated="):
				t.Errorf("status line %q; want it to end %q, no layer missing", status, tc.wantStatus)
			case tc.wantErr != "" && (code == 0 || !strings.Contains(errs, tc.wantErr)):
				t.Errorf("%s = %d, stderr %q; want %q", tc.cmd, code, errs, tc.wantErr)
			case tc.wantErr == "" && (code != 0 || out == ""):
				t.Errorf("%s = %d, stdout %q, stderr %q; want it to hold", tc.cmd, code, out, errs)
			}
		})
	}
	// --exec runs in place: no layer, all named; refused when required.
	if code, _, errs := runBin(t, bin, nil, "run", "--exec", "--without", "uts", "--config", cfg, "--", "true"); code != 0 || !strings.HasSuffix(strings.TrimSpace(errs), " without=uts unisolated=mounts,pid,ipc,memfd") {
		t.Errorf("--exec --without uts = %d, %q; want the status line to end without=uts unisolated=mounts,pid,ipc,memfd", code, errs)
	}
	if code, _, errs := runBin(t, bin, nil, "run", "--exec", "--require-isolation", "--config", cfg, "--", "true"); code != cli.ExitRefused || !strings.Contains(errs, "Nothing ran.") {
		t.Errorf("--exec --require-isolation = %d, %q; want 125, nothing run", code, errs)
	}
	if code, _, errs := runBin(t, bin, nil, "run", "--without", "net", "--config", cfg, "--", "true"); code != cli.ExitUsage || !strings.Contains(errs, `unknown isolation layer "net"`) {
		t.Errorf("--without net = %d, %q; want a usage error naming the layer", code, errs)
	}
}

// TestRunRequireIsolation: a layer that cannot be had is named on the
// status line (unisolated=) and the command runs; --require-isolation
// refuses it (125, naming the layer and why, nothing run) unless that
// layer is switched off. Run as uid 65534: a user namespace gives the
// init the namespaces and mounts, but vm.memfd_noexec is root's alone.
func TestRunRequireIsolation(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the case as uid 65534")
	}
	bin := lockstepbin.Build(t)
	d := t.TempDir()
	openToAll(t, d)
	lbin, cfg := filepath.Join(d, "lockstep"), filepath.Join(d, "p.cfg")
	if err := copyFile(bin, lbin); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(truePolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string, string) {
		cmd := exec.Command(lbin, append(append([]string{"run"}, args...), "--config", cfg, "--", "/usr/bin/echo", "ran")...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		cmd.Dir = d // the checkout may be closed to uid 65534 (a 0700 clone)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, out.String(), errb.String()
	}
	code, out, errs := run()
	_, missing, found := strings.Cut(strings.TrimSpace(errs), " unisolated=")
	if code != 0 || out != "ran\n" || !found || !strings.Contains(missing, "memfd") {
		t.Fatalf("lockstep run as uid 65534 = %d, %q, stderr %q; want it to run, the status line naming memfd in unisolated=", code, out, errs)
	}
	code, out, errs = run("--require-isolation")
	if code != cli.ExitRefused || out != "" || !strings.Contains(errs, "memfd: ") || !strings.Contains(errs, "Nothing ran.") {
		t.Errorf("--require-isolation as uid 65534 = %d, %q, stderr %q; want 125 naming memfd and why, nothing run", code, out, errs)
	}
	code, out, errs = run("--require-isolation", "--without", missing)
	if code != 0 || out != "ran\n" {
		t.Errorf("--require-isolation --without %s as uid 65534 = %d, %q, stderr %q; want it to run", missing, code, out, errs)
	}
}

// noUserNamespaces runs argv[1:] as uid 65534 inside a user namespace
// (root there) whose user.max_user_namespaces is 0: an unprivileged caller
// on a machine where no user namespace can be made.
const noUserNamespaces = `
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
r, w = os.pipe()
r2, w2 = os.pipe()
pid = os.fork()
if pid == 0:
    if libc.unshare(0x10000000) != 0:
        sys.exit("unshare: errno %d" % ctypes.get_errno())
    os.write(w, b"x"); os.read(r2, 1)
    os.setresgid(0, 0, 0); os.setresuid(0, 0, 0)
    open("/proc/sys/user/max_user_namespaces", "w").write("0")
    os.setgroups([])
    os.chdir(os.path.dirname(sys.argv[1]))  # the checkout may be closed to uid 65534
    os.setresgid(65534, 65534, 65534); os.setresuid(65534, 65534, 65534)
    os.execv(sys.argv[1], sys.argv[1:])
os.read(r, 1)
for f, v in (("uid_map", "0 0 65536\n"), ("setgroups", "allow\n"), ("gid_map", "0 0 65536\n")):
    open("/proc/%d/%s" % (pid, f), "w").write(v)
os.write(w2, b"x")
sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
`

// TestRunWithoutUserNamespaces: an unprivileged caller where no user
// namespace can be made gets no layer: the command runs, the status line
// names every layer (unisolated=), and --require-isolation refuses (125)
// saying why.
func TestRunWithoutUserNamespaces(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to set up the unprivileged caller")
	}
	py := needPython(t)
	bin := lockstepbin.Build(t)
	d := t.TempDir()
	openToAll(t, d)
	lbin, cfg := filepath.Join(d, "lockstep"), filepath.Join(d, "p.cfg")
	if err := copyFile(bin, lbin); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(truePolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runBin(t, py, nil, "-S", "-c", noUserNamespaces, lbin, "run", "--config", cfg, "--", "/usr/bin/echo", "ran")
	if code != 0 || out != "ran\n" || !strings.HasSuffix(strings.TrimSpace(errs), " unisolated=mounts,pid,ipc,uts,memfd") {
		t.Errorf("lockstep run without user namespaces = %d, %q, stderr %q; want it to run, unisolated= naming every layer", code, out, errs)
	}
	code, out, errs = runBin(t, py, nil, "-S", "-c", noUserNamespaces, lbin, "run", "--require-isolation", "--config", cfg, "--", "/usr/bin/echo", "ran")
	if code != cli.ExitRefused || out != "" || !strings.Contains(errs, "no user namespace can be created here") {
		t.Errorf("--require-isolation without user namespaces = %d, %q, stderr %q; want 125 saying no user namespace can be made", code, out, errs)
	}
}

// ptyFork opens a pseudo-terminal pair and starts a child on it.
const ptyFork = `
import errno, os, pty
try:
    pid, fd = pty.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    print("pty ok")
except OSError as e:
    print("pty", errno.errorcode[e.errno])
`

// TestRunPtyUnderMountsLayer: a policy granting /dev/ptmx and /dev/pts
// opens ptys under the mounts layer too. Device nodes are not bound onto
// themselves (a device is written on a read-only mount anyway): a bind of
// /dev/ptmx made the kernel hand out ptys of its internal devpts, which
// /dev/pts does not show, and openpty failed with ENOENT (the c-gcc and
// cpp reference exercises under their shipped bases).
func TestRunPtyUnderMountsLayer(t *testing.T) {
	py := needPython(t)
	bin := lockstepbin.Build(t)
	cfg := filepath.Join(t.TempDir(), "p.cfg")
	policy := truePolicy + "[read]\n/dev/ptmx\n/dev/pts\n[write]\n/dev/ptmx\n/dev/pts\n[ioctl]\n/dev/ptmx\n/dev/pts\n"
	if err := os.WriteFile(cfg, []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runBin(t, bin, nil, "run", "-q", "--config", cfg, "--", py, "-S", "-c", ptyFork)
	if code != 0 || out != "pty ok\n" {
		t.Errorf("pty.fork under lockstep run = %d, %q, stderr %q; want pty ok", code, out, errs)
	}
}
