package enforcer

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// CgroupRoot is where the enforcer looks for cgroup file systems. Tests never
// change it; it is a variable so that the documentation can name it.
var CgroupRoot = "/sys/fs/cgroup"

var cgroupSeq atomic.Int64

// liveCgroups holds every cgroup directory this process created and has not
// removed (TestMain fails the package if one survives).
var liveCgroups sync.Map

// caps is a cgroup (v2, or a v1 pids and/or memory pair) that holds the
// command's processes and caps their number and memory.
type caps struct {
	desc    string   // status line value: "v2", "v1", or "none:<reason>"
	dirs    []string // cgroups the child joins (v1: one per hierarchy)
	v2      bool
	pidsEv  string // file with "max N" (pids.events)
	memEv   string // memory.events (v2, "oom_kill N") or memory.oom_control (v1)
	nproc   int64
	memMB   int64
	created []string
	rp      *reaper // told of each cgroup before it is made

	// Kept open from set-up, so that killAll needs no new descriptor:
	// a command that lowered lockstep's RLIMIT_NOFILE (prlimit on a
	// process of its uid, where no PID namespace hides lockstep) made
	// every open fail, and killAll once took that for an empty cgroup.
	procsF []*os.File // cgroup.procs of each of dirs (nil: read by path)
	killF  *os.File   // cgroup.kill of a v2 cgroup (nil: written by path)
}

// keepOpen opens the cgroup files killAll reads and writes (see procsF);
// a file it cannot open is read or written by path later.
func (c *caps) keepOpen() {
	c.procsF = make([]*os.File, len(c.dirs))
	for i, d := range c.dirs {
		if f, err := os.Open(filepath.Join(d, "cgroup.procs")); err == nil {
			c.procsF[i] = f
		}
	}
	if c.v2 {
		if f, err := os.OpenFile(filepath.Join(c.dirs[0], "cgroup.kill"), os.O_WRONLY, 0); err == nil {
			c.killF = f
		}
	}
}

// closeKept closes what keepOpen opened.
func (c *caps) closeKept() {
	for _, f := range c.procsF {
		if f != nil {
			f.Close()
		}
	}
	if c.killF != nil {
		c.killF.Close()
	}
	c.procsF, c.killF = nil, nil
}

// pids reads the processes of dirs[i], through the kept descriptor when
// there is one (a seq_file read from offset 0 lists the cgroup afresh).
func (c *caps) pids(i int) ([]int, error) {
	if i < len(c.procsF) && c.procsF[i] != nil {
		data, err := io.ReadAll(io.NewSectionReader(c.procsF[i], 0, 1<<40))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", c.procsF[i].Name(), err)
		}
		return parseProcs(data), nil
	}
	return cgroupPids(c.dirs[i])
}

// setupCaps creates a cgroup capping processes at nproc and memory at memMB
// (0: no cap) for one command. It prefers cgroup v2 at CgroupRoot when that is
// a writable cgroup2 mount with the controllers available, else the v1 pids
// and memory hierarchies below CgroupRoot; when neither works it returns caps
// whose desc says why, and the rlimits alone apply. Each cgroup is announced
// to rp before it is made (nil: none is).
func setupCaps(nproc, memMB int64, rp *reaper) *caps {
	if nproc == 0 && memMB == 0 {
		return nil
	}
	c := &caps{nproc: nproc, memMB: memMB, rp: rp}
	var st unix.Statfs_t
	if err := unix.Statfs(CgroupRoot, &st); err != nil {
		c.desc = "none:" + noSpace(err.Error())
		return c
	}
	name := fmt.Sprintf("lockstep-%d-%d", os.Getpid(), cgroupSeq.Add(1))
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		if err := c.setupV2(name); err != nil {
			c.remove()
			c.desc = "none:" + noSpace(err.Error())
		}
		return c
	}
	if err := c.setupV1(name); err != nil {
		c.remove()
		c.desc = "none:" + noSpace(fmt.Sprintf("%s is not cgroup2 and %v", CgroupRoot, err))
		return c
	}
	return c
}

func noSpace(s string) string { return strings.ReplaceAll(s, " ", "_") }

// ownCgroup returns this process's cgroup path in the hierarchy whose
// /proc/self/cgroup line has controller list ctl ("" for v2).
func ownCgroup(ctl string) (string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	return parseProcCgroup(data, ctl)
}

// parseProcCgroup finds the path of the hierarchy with controller ctl ("" for
// the v2 line "0::<path>") in the text of /proc/<pid>/cgroup.
func parseProcCgroup(data []byte, ctl string) (string, error) {
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || !strings.HasPrefix(parts[2], "/") {
			continue
		}
		if ctl == "" && parts[0] == "0" && parts[1] == "" {
			return parts[2], nil
		}
		for _, c := range strings.Split(parts[1], ",") {
			if ctl != "" && c == ctl {
				return parts[2], nil
			}
		}
	}
	return "", fmt.Errorf("/proc/self/cgroup has no %q hierarchy", ctl)
}

// setupV2 creates the cgroup below this process's own cgroup, or, when the
// controllers cannot be had there (a non-root cgroup holding processes
// cannot enable controllers for children), below the hierarchy's root, which
// is exempt from that rule (root only).
func (c *caps) setupV2(name string) error {
	own, err := ownCgroup("")
	if err != nil {
		return err
	}
	parents := []string{filepath.Join(CgroupRoot, own)}
	if own != "/" {
		parents = append(parents, CgroupRoot)
	}
	var errs []string
	for _, parent := range parents {
		err := c.setupV2In(parent, name)
		if err == nil {
			return nil
		}
		errs = append(errs, err.Error())
		if rmErr := c.remove(); rmErr != nil {
			return fmt.Errorf("%s; and %v", strings.Join(errs, "; "), rmErr)
		}
	}
	return errors.New(strings.Join(errs, "; "))
}

func (c *caps) setupV2In(parent, name string) error {
	dir := filepath.Join(parent, name)
	if err := c.rp.announce(dir); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("cgroup2 not writable: %w", err)
	}
	c.created = append(c.created, dir)
	liveCgroups.Store(dir, true)
	var want []string
	if c.nproc > 0 {
		want = append(want, "pids")
	}
	if c.memMB > 0 {
		want = append(want, "memory")
	}
	for _, ctl := range want {
		if _, err := os.Stat(filepath.Join(dir, ctl+".max")); err == nil {
			continue
		}
		// Try to enable it for our children; refused when our own
		// cgroup holds processes and is not the root.
		_ = os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+"+ctl), 0)
		if _, err := os.Stat(filepath.Join(dir, ctl+".max")); err != nil {
			return fmt.Errorf("cgroup2 %s controller not enabled in %s", ctl, parent)
		}
	}
	if c.nproc > 0 {
		// The cap itself is written later (see pidsMax), once the
		// enforcer child's threads are in; here only that it can be.
		if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte("max"), 0); err != nil {
			return fmt.Errorf("set pids.max: %w", err)
		}
		c.pidsEv = filepath.Join(dir, "pids.events")
	}
	if c.memMB > 0 {
		if err := os.WriteFile(filepath.Join(dir, "memory.max"), []byte(strconv.FormatInt(c.memMB<<20, 10)), 0); err != nil {
			return fmt.Errorf("set memory.max: %w", err)
		}
		_ = os.WriteFile(filepath.Join(dir, "memory.swap.max"), []byte("0"), 0)
		c.memEv = filepath.Join(dir, "memory.events")
	}
	c.v2 = true
	c.dirs = []string{dir}
	c.desc = "v2"
	c.keepOpen()
	return nil
}

func (c *caps) setupV1(name string) error {
	type hier struct{ ctl, limitFile, value, events string }
	var hs []hier
	if c.nproc > 0 {
		hs = append(hs, hier{"pids", "pids.max", strconv.FormatInt(c.nproc, 10), "pids.events"})
	}
	if c.memMB > 0 {
		hs = append(hs, hier{"memory", "memory.limit_in_bytes", strconv.FormatInt(c.memMB<<20, 10), "memory.oom_control"})
	}
	for _, h := range hs {
		own, err := ownCgroup(h.ctl)
		if err != nil {
			return fmt.Errorf("no v1 %s hierarchy: %w", h.ctl, err)
		}
		dir := filepath.Join(CgroupRoot, h.ctl, own, name)
		if err := c.rp.announce(dir); err != nil {
			return err
		}
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fmt.Errorf("no writable v1 %s hierarchy: %w", h.ctl, err)
		}
		c.created = append(c.created, dir)
		liveCgroups.Store(dir, true)
		if err := os.WriteFile(filepath.Join(dir, h.limitFile), []byte(h.value), 0); err != nil {
			return fmt.Errorf("set %s: %w", h.limitFile, err)
		}
		if h.ctl == "memory" {
			// Best effort: no swap beyond the cap (absent without swap accounting).
			_ = os.WriteFile(filepath.Join(dir, "memory.memsw.limit_in_bytes"), []byte(h.value), 0)
			c.memEv = filepath.Join(dir, h.events)
		} else {
			c.pidsEv = filepath.Join(dir, h.events)
		}
		c.dirs = append(c.dirs, dir)
	}
	c.desc = "v1"
	c.keepOpen()
	return nil
}

// pidsMax is the v2 cgroup's pids.max file and the cap to write in it ("",
// "" when there is none; v1 writes it at set-up, as its child joins late).
// The write is apart from set-up because the re-executed child is born in
// the cgroup (clone3 CLONE_INTO_CGROUP) and its Go runtime starts threads
// until well after the clone returns: a policy's nproc may be fewer than
// that (nproc=1 killed the child's runtime, "failed to create new OS
// thread", when the parent capped right after the start). So the child
// writes it, once its threads are up and just before it restricts itself
// and execs.
func (c *caps) pidsMax() (file, value string) {
	if !c.ok() || !c.v2 || c.nproc == 0 {
		return "", ""
	}
	return filepath.Join(c.dirs[0], "pids.max"), strconv.FormatInt(c.nproc, 10)
}

// bornIn reports whether a child can be cloned straight into the cgroup
// (one v2 cgroup) rather than join it by writing cgroup.procs.
func (c *caps) bornIn() bool { return c.ok() && c.v2 && len(c.dirs) == 1 }

// ok reports whether the caps are in force.
func (c *caps) ok() bool { return c != nil && len(c.dirs) > 0 }

// passed reports which cap was passed, if any: a fork refused by pids.max, or
// a process killed by the memory cap's OOM killer.
func (c *caps) passed() string {
	if !c.ok() {
		return ""
	}
	if c.pidsEv != "" && eventCount(c.pidsEv, "max") > 0 {
		return fmt.Sprintf("process cap nproc=%d passed (a fork was refused)", c.nproc)
	}
	if c.memEv != "" && eventCount(c.memEv, "oom_kill") > 0 {
		return fmt.Sprintf("memory cap mem_mb=%d passed (the OOM killer ran)", c.memMB)
	}
	return ""
}

func eventCount(file, key string) int64 {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	return parseEvent(data, key)
}

// parseEvent returns the count of key in a cgroup "key value" file
// (pids.events, memory.events, memory.oom_control); 0 when absent.
func parseEvent(data []byte, key string) int64 {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == key {
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil || n < 0 {
				return 0
			}
			return n
		}
	}
	return 0
}

// killAll kills every process in the cgroups and waits until they are empty
// or the deadline passes. It fails closed: a cgroup.procs that cannot be
// read (a command that lowered lockstep's RLIMIT_NOFILE: no file opens)
// is never taken for an empty cgroup; a v2 cgroup is then killed whole
// (cgroup.kill) until its cgroup.procs reads empty, and if it never does
// killAll says processes may be left.
func (c *caps) killAll(deadline time.Duration) error {
	if !c.ok() {
		return nil
	}
	if c.v2 {
		_ = c.killWhole()
	}
	end := time.Now().Add(deadline)
	for {
		left, unread := 0, error(nil)
		for i := range c.dirs {
			pids, err := c.pids(i)
			if err != nil {
				unread = err
				if c.v2 {
					_ = c.killWhole()
				}
				continue
			}
			for _, pid := range pids {
				left++
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if left == 0 && unread == nil {
			return nil
		}
		if time.Now().After(end) {
			if unread != nil {
				return fmt.Errorf("processes may be left in %v: %v", c.dirs, unread)
			}
			return fmt.Errorf("%d processes still in %v after SIGKILL", left, c.dirs)
		}
		rawSleep(5 * time.Millisecond)
	}
}

// rawSleep sleeps with nanosleep(2), not the Go runtime's timers: a first
// timer initialises the runtime's poller, which needs two descriptors,
// and the cgroup reaper must work where none can be opened.
func rawSleep(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}

// readRaw and writeRaw read and write a cgroup file with plain system
// calls: an os.File would initialise the runtime's poller (see rawSleep).
func readRaw(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var data []byte
	buf := make([]byte, 4096)
	for {
		n, err := unix.Read(fd, buf)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		case n == 0:
			return data, nil
		}
		data = append(data, buf[:n]...)
	}
}

func writeRaw(path string, data []byte) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	if _, err := unix.Write(fd, data); err != nil {
		return &os.PathError{Op: "write", Path: path, Err: err}
	}
	return nil
}

// killWhole writes cgroup.kill of a v2 cgroup: the kernel kills every
// process in it, whoever they are.
func (c *caps) killWhole() error {
	if c.killF != nil {
		_, err := c.killF.Write([]byte("1"))
		return err
	}
	return writeRaw(filepath.Join(c.dirs[0], "cgroup.kill"), []byte("1"))
}

// cgroupPids lists the processes in dir's cgroup.procs. Only positive pids
// are kept: the kernel writes 0 for a process it cannot name in the
// reader's pid namespace, and kill(0) (or a negative pid) would signal the
// killer's own process group (or every process): for an enforcer started
// in its caller's group (the containment probes) that is the caller.
func cgroupPids(dir string) ([]int, error) {
	data, err := readRaw(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	return parseProcs(data), nil
}

// parseProcs reads the positive pids of a cgroup.procs text.
func parseProcs(data []byte) []int {
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		if n, err := strconv.Atoi(f); err == nil && n > 0 {
			pids = append(pids, n)
		}
	}
	return pids
}

// remove deletes the cgroups, retrying while exiting processes leave them.
func (c *caps) remove() error {
	if c == nil {
		return nil
	}
	c.closeKept()
	var errs []error
	for _, d := range c.created {
		var err error
		for i := 0; i < 200; i++ {
			if err = unix.Rmdir(d); err == nil || err == unix.ENOENT {
				err = nil
				liveCgroups.Delete(d)
				break
			}
			rawSleep(5 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, &os.PathError{Op: "remove", Path: d, Err: err})
		}
	}
	c.created = nil
	return errors.Join(errs...)
}

// CgroupCaps says which cgroup caps Run would use on this machine for a
// policy with nproc and mem_mb: "v2", "v1", or "none:<why>". It creates and
// removes a probe cgroup to find out.
func CgroupCaps() string {
	c := setupCaps(1, 1, nil)
	defer c.remove()
	return c.desc
}

// setupContainment creates a cgroup v2 that only holds the command's
// processes (no controller, no cap), so that whatever the command starts,
// even a process that leaves its process group with setsid, is killed when
// it ends. It looks at CgroupRoot and, on a hybrid layout, CgroupRoot/unified.
// It returns nil when neither is a cgroup2 mount this process may write, or
// the reaper rp cannot be told (then only the process group is killed).
func setupContainment(rp *reaper) *caps {
	own, err := ownCgroup("")
	if err != nil {
		return nil
	}
	for _, root := range []string{CgroupRoot, filepath.Join(CgroupRoot, "unified")} {
		var st unix.Statfs_t
		if unix.Statfs(root, &st) != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
			continue
		}
		dir := filepath.Join(root, own, fmt.Sprintf("lockstep-%d-%d", os.Getpid(), cgroupSeq.Add(1)))
		if rp.announce(dir) != nil || os.Mkdir(dir, 0o755) != nil {
			return nil
		}
		liveCgroups.Store(dir, true)
		c := &caps{desc: "contain", v2: true, dirs: []string{dir}, created: []string{dir}}
		c.keepOpen()
		return c
	}
	return nil
}
