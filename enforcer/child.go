package enforcer

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// init makes every binary that links this package a valid re-executed child:
// with RoleEnv=ChildRole it becomes the child before main (or a test
// binary's TestMain) runs, so a program or test calling Run can never start
// itself again by mistake.
func init() {
	if os.Getenv(RoleEnv) == ChildRole {
		os.Exit(ChildMain())
	}
}

// ChildMain is the restricted child's entry point. The package's init calls
// it when the environment has RoleEnv=ChildRole; cmd/lockstep also lists it
// as a hidden role. It reads its instructions from fd 3, joins the
// cgroups, changes directory, builds the Landlock ruleset, restricts itself,
// writes the status line, sets the rlimits and executes the command. Any
// failure before the exec is written to fd 4 (closed on exec) and returned
// as the exit status: 125 refused, 126 cannot execute, 127 not found.
func ChildMain() int {
	runtime.LockOSThread() // never unlocked: the restricted thread execs
	rep := os.NewFile(4, "lockstep-report")
	syscall.CloseOnExec(4)
	fail := func(status int, format string, a ...any) int {
		msg := fmt.Sprintf(format, a...)
		if rep != nil {
			_ = json.NewEncoder(rep).Encode(childReport{Status: status, Msg: msg})
		}
		if rep == nil {
			fmt.Fprintf(os.Stderr, "lockstep run: %s\n", msg)
		}
		return status
	}
	specFile := os.NewFile(3, "lockstep-spec")
	if specFile == nil {
		return fail(StatusRefused, "enforcer child started without its instructions on fd 3")
	}
	var spec childSpec
	err := json.NewDecoder(specFile).Decode(&spec)
	specFile.Close()
	if err != nil {
		return fail(StatusRefused, "read instructions: %v", err)
	}
	if len(spec.Command) == 0 || spec.Ruleset == nil {
		return fail(StatusRefused, "instructions lack a command or a ruleset")
	}
	pid := []byte(strconv.Itoa(os.Getpid()))
	for _, d := range spec.Cgroups {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), pid, 0); err != nil {
			return fail(StatusRefused, "join cgroup %s: %v", d, err)
		}
	}
	if spec.Dir != "" {
		if err := os.Chdir(spec.Dir); err != nil {
			return fail(StatusRefused, "change directory: %v", err)
		}
	}
	path, status, err := lookPath(spec.Command[0], spec.Env)
	if err != nil {
		return fail(status, "%v", err)
	}
	if err := restrictSelf(spec.Ruleset); err != nil {
		return fail(StatusRefused, "%v", err)
	}
	if spec.Status != "" {
		fmt.Fprintln(os.Stderr, spec.Status)
	}
	for _, r := range spec.Rlimits {
		lim := syscall.Rlimit{Cur: r.Value, Max: r.Value}
		if err := syscall.Setrlimit(r.Resource, &lim); err != nil {
			return fail(StatusRefused, "set %s limit to %d: %v", r.Name, r.Value, err)
		}
	}
	err = syscall.Exec(path, spec.Command, spec.Env)
	switch {
	case errors.Is(err, syscall.ENOENT):
		return fail(StatusNotFound, "%s: %v", path, err)
	case errors.Is(err, syscall.EACCES):
		return fail(StatusCannotExec, "%s: %v (is it granted in [execute], and its interpreter and libraries in [execute] and [read]?)", path, err)
	default:
		return fail(StatusCannotExec, "%s: %v", path, err)
	}
}

// restrictSelf builds the ruleset with go-landlock and enforces it on this
// (locked) thread, which then execs. Every right of rs's handled sets is
// handled; no best-effort downgrade happens (Compile already checked the ABI).
func restrictSelf(rs *Ruleset) error {
	cfg := landlock.Config{
		HandledAccessFS:  landlock.AccessFSSet(rs.HandledFS),
		HandledAccessNet: landlock.AccessNetSet(rs.HandledNet),
		Scoped:           landlock.ScopedSet(rs.Scoped),
	}
	if rs.Flags&RestrictLogNewExecOn != 0 {
		cfg = cfg.EnableLoggingForSubprocesses()
	}
	rules := make([]landlock.Rule, 0, len(rs.Paths)+len(rs.Ports))
	for _, p := range rs.Paths {
		rules = append(rules, landlock.PathAccess(landlock.AccessFSSet(p.Access), p.Path))
	}
	for _, p := range rs.Ports {
		for bit := uint64(1); bit <= p.Access; bit <<= 1 {
			switch p.Access & bit {
			case NetBindTCP:
				rules = append(rules, landlock.BindTCP(p.Port))
			case NetConnectTCP:
				rules = append(rules, landlock.ConnectTCP(p.Port))
			case NetBindUDP:
				rules = append(rules, landlock.BindUDP(p.Port))
			case NetConnectSendUDP:
				rules = append(rules, landlock.ConnectSendUDP(p.Port))
			}
		}
	}
	fd, flags, err := cfg.NewRulesetFD(rules...)
	if err != nil {
		return fmt.Errorf("build the Landlock ruleset: %w", err)
	}
	if fd < 0 {
		return errors.New("build the Landlock ruleset: nothing to restrict (BUG: Compile handles every right of the ABI)")
	}
	defer unix.Close(fd)
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("landlock_restrict_self(flags=%#x): %w", flags, err)
	}
	return nil
}

// lookPath finds name as execve would through a shell: a name with a slash
// as is, else the first executable regular file of that name in env's PATH.
// The status is 127 when nothing is found, 126 when what is found cannot be
// executed.
func lookPath(name string, env []string) (string, int, error) {
	check := func(p string) (int, error) {
		st, err := os.Stat(p)
		if err != nil {
			return StatusNotFound, fmt.Errorf("%s: not found", p)
		}
		if st.IsDir() || st.Mode()&0o111 == 0 {
			return StatusCannotExec, fmt.Errorf("%s: cannot execute: not an executable file (mode %v)", p, st.Mode())
		}
		return 0, nil
	}
	if strings.Contains(name, "/") {
		status, err := check(name)
		return name, status, err
	}
	pathEnv := "/usr/local/bin:/usr/bin:/bin"
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			pathEnv = v
		}
	}
	var firstBad error
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		status, err := check(p)
		if err == nil {
			return p, 0, nil
		}
		if status == StatusCannotExec && firstBad == nil {
			firstBad = err
		}
	}
	if firstBad != nil {
		return "", StatusCannotExec, firstBad
	}
	return "", StatusNotFound, fmt.Errorf("%s: command not found in PATH=%s", name, pathEnv)
}
