package cold

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/lockstep-sandbox/lockstep/internal/mountinfo"
	"github.com/lockstep-sandbox/lockstep/internal/nsexec"
	"golang.org/x/sys/unix"
)

// Verb is the role's first argument: `<program> cold-run --stage S --keep
// K… -- <command>…`.
const Verb = "cold-run"

// SetupStatus is the role's exit status when it could not give the command
// a cold root; the command has not run. Its message names what failed.
const SetupStatus = 125

// Hint is what a container needs for Enter, said where it fails.
const Hint = "each run of the prune starts in a mount namespace of its own with the system paths under throwaway overlays (docs/prune.md, \"Cold runs\"); this needs CAP_SYS_ADMIN and mount(2): in a container, --cap-add SYS_ADMIN --security-opt apparmor=unconfined"

// Command is the argv prefix that runs a command cold: program (e.g.
// {lockstep} or {os.Executable()}), the verb, the stage and the keep paths.
// The command follows.
func Command(program []string, stage string, keep []string) []string {
	argv := append(append([]string(nil), program...), Verb, "--stage", stage)
	for _, k := range keep {
		argv = append(argv, "--keep", k)
	}
	return append(argv, "--")
}

// Main is the role: it parses its arguments and calls Exec. It returns
// only on failure: SetupStatus, or 2 for bad arguments.
func Main(args []string, stderr io.Writer) int {
	stage, keep, argv, err := parseArgs(args)
	if err != nil {
		fmt.Fprintf(stderr, "usage: %s --stage <dir> [--keep <dir>]… -- <command>…: %v\n", Verb, err)
		return 2
	}
	return Exec(stage, keep, argv, stderr)
}

// Exec enters a cold root (Enter) and executes argv in place of this
// process, so the run's process is the command's and a signal to its
// process group reaches it. It returns only on failure, with SetupStatus.
func Exec(stage string, keep, argv []string, stderr io.Writer) int {
	if len(argv) == 0 {
		fmt.Fprintf(stderr, "lockstep %s: no command\n", Verb)
		return SetupStatus
	}
	return nsexec.Exec(Verb, SetupStatus, func() error { return Enter(stage, keep) }, Hint, argv, stderr)
}

func parseArgs(args []string) (stage string, keep, argv []string, err error) {
	for len(args) > 0 && args[0] != "--" {
		if len(args) < 2 {
			return "", nil, nil, fmt.Errorf("%s needs a value", args[0])
		}
		switch args[0] {
		case "--stage":
			stage = args[1]
		case "--keep":
			keep = append(keep, args[1])
		default:
			return "", nil, nil, fmt.Errorf("unknown argument %q", args[0])
		}
		args = args[2:]
	}
	if len(args) < 2 {
		return "", nil, nil, errors.New("no command after --")
	}
	if stage == "" {
		return "", nil, nil, errors.New("no --stage")
	}
	return stage, keep, args[1:], nil
}

// Enter moves the calling thread (locked to its goroutine) into a mount
// namespace of its own whose root is a cold copy of the current one
// (Plan), changes into it and into the same working directory, and drops
// CAP_SYS_ADMIN from the bounding set. stage must be an empty directory
// outside every keep path; it is covered by a tmpfs that only the new
// namespace sees.
func Enter(stage string, keep []string) error {
	cwd, err := os.Getwd()
	if err != nil {
		return err
	}
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare(CLONE_NEWNS): %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making / private: %w", err)
	}
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	mounts, err := mountinfo.Parse(data)
	if err != nil {
		return err
	}
	steps, err := Plan(mounts, keep, stage)
	if err != nil {
		return err
	}
	if err := unix.Mount("lockstep-cold", stage, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0700"); err != nil {
		return fmt.Errorf("a tmpfs at the stage %s: %w", stage, err)
	}
	root := filepath.Join(stage, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		return err
	}
	for i, st := range steps {
		if err := apply(st, root, filepath.Join(stage, strconv.Itoa(i))); err != nil {
			return fmt.Errorf("%s of %s (%s): %w", st.Kind, st.Path, st.FSType, err)
		}
	}
	return switchRoot(root, cwd)
}

// apply mounts one step at root+st.Path; layer is this step's own
// directory in the stage.
func apply(st Step, root, layer string) error {
	target := filepath.Join(root, st.Path)
	if _, err := os.Lstat(target); errors.Is(err, fs.ErrNotExist) {
		// A mount hidden by one above it, or a tree (/dev) this root lacks.
		return nil
	}
	fi, err := os.Stat(st.Path)
	if err != nil {
		return err
	}
	switch {
	case st.Kind == RBind:
		return unix.Mount(st.Path, target, "", unix.MS_BIND|unix.MS_REC, "")
	case !fi.IsDir() && st.Kind == Overlay:
		return bindCopy(st.Path, target, layer)
	case st.Kind == Bind:
		return unix.Mount(st.Path, target, "", unix.MS_BIND, "")
	}
	upper, work := filepath.Join(layer, "upper"), filepath.Join(layer, "work")
	for _, d := range []string{upper, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	opts := "lowerdir=" + escape(st.Path) + ",upperdir=" + escape(upper) + ",workdir=" + escape(work)
	return unix.Mount("lockstep-cold", target, "overlay", 0, opts)
}

// bindCopy binds a copy of the file src, made in layer, at target: a
// writable file mounted on its own cannot be an overlay.
func bindCopy(src, target, layer string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(layer, 0o700); err != nil {
		return err
	}
	cp := filepath.Join(layer, "file")
	if err := os.WriteFile(cp, data, fi.Mode().Perm()); err != nil {
		return err
	}
	return unix.Mount(cp, target, "", unix.MS_BIND, "")
}

// escape protects the characters overlayfs's options give a meaning:
// the separators of options and layers, and the escape itself.
func escape(p string) string {
	return strings.NewReplacer(`\`, `\\`, `,`, `\,`, `:`, `\:`).Replace(p)
}

// switchRoot puts the new root over / (as switch_root does: pivot_root is
// refused by a container's default seccomp profile), changes root into it
// and back into cwd, and drops CAP_SYS_ADMIN from the bounding set.
func switchRoot(root, cwd string) error {
	if err := unix.Chdir(root); err != nil {
		return err
	}
	if err := unix.Mount(root, "/", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("moving the new root over /: %w", err)
	}
	if err := unix.Chroot("."); err != nil {
		return fmt.Errorf("chroot into the new root: %w", err)
	}
	if err := unix.Chdir(cwd); err != nil {
		return fmt.Errorf("the working directory %s in the new root: %w", cwd, err)
	}
	if err := unix.Prctl(unix.PR_CAPBSET_DROP, unix.CAP_SYS_ADMIN, 0, 0, 0); err != nil {
		return fmt.Errorf("dropping CAP_SYS_ADMIN: %w", err)
	}
	return nil
}
