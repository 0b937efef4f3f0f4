package limits

import (
	"bytes"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

// Interval is the Sampler's period.
const Interval = 100 * time.Millisecond

// userHZ is the unit of utime and stime in /proc/<pid>/stat.
const userHZ = 100

// Measurement is what one run used. JSON names are Phobos's.
type Measurement struct {
	WallSeconds   float64 `json:"wall_seconds"`
	CPUSeconds    float64 `json:"cpu_seconds"`
	VMPeakMB      float64 `json:"vm_peak_mb"`
	Tasks         int     `json:"tasks"`
	HighestFD     int     `json:"highest_descriptor"`
	OpenFDs       int     `json:"open_descriptors"` // the most one process held at once
	LargestFileMB float64 `json:"largest_file_mb"`
	Samples       int     `json:"samples"`
}

// Max is the field-wise maximum of ms.
func Max(ms ...Measurement) Measurement {
	var m Measurement
	for _, x := range ms {
		m.WallSeconds = math.Max(m.WallSeconds, x.WallSeconds)
		m.CPUSeconds = math.Max(m.CPUSeconds, x.CPUSeconds)
		m.VMPeakMB = math.Max(m.VMPeakMB, x.VMPeakMB)
		m.Tasks = max(m.Tasks, x.Tasks)
		m.HighestFD = max(m.HighestFD, x.HighestFD)
		m.OpenFDs = max(m.OpenFDs, x.OpenFDs)
		m.LargestFileMB = math.Max(m.LargestFileMB, x.LargestFileMB)
		m.Samples += x.Samples
	}
	return m
}

// Sampler samples one process tree until Stop.
type Sampler struct {
	root   int // the tree's top (Watch); -1 until then
	proc   string
	stop   chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	m      Measurement
	cpu    map[int]float64
	start  time.Time
	closed bool
	skip   string
}

// StartTree starts sampling one process tree whose top is not known yet:
// nothing is sampled until Watch names it, then that process and its
// descendants are, except processes whose executable is skipExe (the
// enforcer that wraps the command; its descendants count). One run is
// measured alone even while others run in the same process (parallel
// prunes in one program, or tests). proc is the proc file system's mount
// ("" is /proc).
func StartTree(proc, skipExe string) *Sampler {
	if proc == "" {
		proc = "/proc"
	}
	s := &Sampler{root: -1, proc: proc, stop: make(chan struct{}), done: make(chan struct{}), cpu: map[int]float64{}, start: time.Now(), skip: skipExe}
	go s.loop()
	return s
}

// Watch sets the top of the tree the sampler measures.
func (s *Sampler) Watch(pid int) {
	s.mu.Lock()
	s.root = pid
	s.mu.Unlock()
}

func (s *Sampler) loop() {
	defer close(s.done)
	t := time.NewTicker(Interval)
	defer t.Stop()
	for {
		s.sample()
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
	}
}

// Stop ends sampling and returns the measurement (WallSeconds from Start
// to Stop; LargestFileMB is the caller's, see LargestFileMB).
func (s *Sampler) Stop() Measurement {
	if !s.closed {
		s.closed = true
		close(s.stop)
		<-s.done
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.m
	for _, c := range s.cpu {
		m.CPUSeconds = math.Max(m.CPUSeconds, c)
	}
	m.WallSeconds = time.Since(s.start).Seconds()
	return m
}

type procInfo struct {
	ppid    int
	cpu     float64
	threads int
}

// readStat reads ppid, utime+stime and num_threads from /proc/<pid>/stat.
func readStat(path string) (procInfo, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return procInfo{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procInfo{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is state (field 3); ppid field 4 → f[1]; utime 14 → f[11]; stime 15 → f[12]; num_threads 20 → f[17].
	if len(f) < 18 {
		return procInfo{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	th, _ := strconv.Atoi(f[17])
	return procInfo{ppid: ppid, cpu: (ut + st) / userHZ, threads: th}, true
}

// sample reads the watched tree once and folds it into the maxima.
func (s *Sampler) sample() {
	s.mu.Lock()
	root := s.root
	s.mu.Unlock()
	if root < 0 {
		return // not watching yet
	}
	info, ok := s.readProcs()
	if !ok {
		return
	}
	desc := descendants(info, root)
	if desc == nil {
		return // the tree is gone
	}
	t := treeSample{fd: -1}
	counted := desc[:0]
	for _, pid := range desc {
		dir := filepath.Join(s.proc, strconv.Itoa(pid))
		if s.skip != "" {
			if exe, err := os.Readlink(filepath.Join(dir, "exe")); err == nil && exe == s.skip {
				continue
			}
		}
		counted = append(counted, pid)
		t.tasks += info[pid].threads
		t.measure(dir)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m.Samples++
	s.m.Tasks = max(s.m.Tasks, t.tasks)
	s.m.VMPeakMB = math.Max(s.m.VMPeakMB, t.vm)
	s.m.HighestFD = max(s.m.HighestFD, t.fd)
	s.m.OpenFDs = max(s.m.OpenFDs, t.open)
	for _, pid := range counted {
		if c := info[pid].cpu; c > s.cpu[pid] {
			s.cpu[pid] = c
		}
	}
}

// readProcs reads the stat of every process under s.proc; false when the
// directory cannot be read.
func (s *Sampler) readProcs() (map[int]procInfo, bool) {
	ents, err := os.ReadDir(s.proc)
	if err != nil {
		return nil, false
	}
	info := map[int]procInfo{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pi, ok := readStat(filepath.Join(s.proc, e.Name(), "stat")); ok {
			info[pid] = pi
		}
	}
	return info, true
}

// descendants is root and every process beneath it, breadth first; nil
// when root is gone.
func descendants(info map[int]procInfo, root int) []int {
	children := map[int][]int{}
	for pid, pi := range info {
		children[pi.ppid] = append(children[pi.ppid], pid)
	}
	if _, ok := info[root]; !ok {
		return nil
	}
	var desc []int
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		desc = append(desc, p)
		queue = append(queue, children[p]...)
	}
	return desc
}

// treeSample is one sample of a process tree: its tasks, the largest
// VmPeak (MiB), the highest descriptor number and the most descriptors
// one process holds open.
type treeSample struct {
	tasks int
	vm    float64
	fd    int
	open  int
}

// measure takes in the process whose /proc directory is dir.
func (t *treeSample) measure(dir string) {
	if b, err := os.ReadFile(filepath.Join(dir, "status")); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "VmPeak:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
				t.vm = math.Max(t.vm, kb/1024)
			}
		}
	}
	if fds, err := os.ReadDir(filepath.Join(dir, "fd")); err == nil {
		t.open = max(t.open, len(fds))
		for _, f := range fds {
			if n, err := strconv.Atoi(f.Name()); err == nil && n > t.fd {
				t.fd = n
			}
		}
	}
}

// LargestFileMB is the size in MiB of the largest regular file beneath the
// paths p grants a write-class right on (outside /proc, /sys and /dev) that
// was modified at or after since: what the run wrote, not what a shared
// directory such as /tmp held already. The zero since counts every file.
func LargestFileMB(p *policy.Policy, since time.Time) float64 {
	var largest int64
	for q, secs := range p.FS {
		if q == "/proc" || q == "/sys" || q == "/dev" || policy.Beneath(q, "/proc") || policy.Beneath(q, "/sys") || policy.Beneath(q, "/dev") {
			continue
		}
		write := false
		for s, on := range secs {
			if on && policy.IsWriteClass(s) {
				write = true
			}
		}
		if !write {
			continue
		}
		filepath.WalkDir(q, func(_ string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if d.Type().IsRegular() {
				if fi, err := d.Info(); err == nil && fi.Size() > largest && !fi.ModTime().Before(since) {
					largest = fi.Size()
				}
			}
			return nil
		})
	}
	return float64(largest) / (1 << 20)
}

// CeilTo is the smallest multiple of step not below x (x/step rounded to 6
// digits first, so 3.0000000001 × step is 3 steps).
func CeilTo(x, step float64) float64 {
	q := math.Round(x/step*1e6) / 1e6
	return math.Ceil(q) * step
}

// Time limits come from ladders of round values rather than multiples of
// 30 s (timeout) and 10 s (cpu) as in Phobos: the wall and CPU times of a run
// vary by tens of percent between prunes (under TCG, on a loaded runner), and
// fine steps made two prunes of one exercise differ in [limits] alone. The
// limit only has to stop a runaway; one rung up is never tight.
var (
	timeoutLadder = []float64{60, 120, 300, 600, 900, 1200, 1800, 2700, 3600}
	cpuLadder     = []float64{30, 60, 120, 300, 600, 900, 1200, 1800, 3600}
)

// Ladder is the smallest rung of steps not below x; above the top rung,
// x rounded up to a multiple of the top rung.
func Ladder(x float64, steps []float64) float64 {
	for _, s := range steps {
		if CeilTo(x, s) <= s {
			return s
		}
	}
	return CeilTo(x, steps[len(steps)-1])
}

// noFile is max(256, highest_fd + 1, 2 × open_fds). The margin is on the
// count of open descriptors, not on the highest number as in Phobos's
// 2 × (highest_fd + 1): bash keeps the script it runs at the top of its
// limit, fd 255 under any limit of 256 or more (min(limit, 256) − 1), so
// the highest number of a shell exercise was 255 when a sample caught a
// script's bash and ~10 when none did, and two prunes of one exercise
// differed in nofile alone (256 against 512). A descriptor's number only
// has to fit below the limit; what grows with the work is how many are open.
func noFile(m Measurement) int {
	return pow2(max(256, m.HighestFD+1, 2*m.OpenFDs))
}

// pow2 is the smallest power of two not below n (n ≥ 1). Counts of tasks and
// descriptors vary from run to run by a few (a JVM's threads, the jars it
// has open), so the margins alone made two prunes of one exercise differ in
// nproc or nofile; rounded up to a power of two they agree unless the count
// crosses one, and the limit stays within 2× of its margin.
func pow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

// Options are the prune.json facts Margins needs.
type Options struct {
	HeapPinned, AddressSpaceUnbounded bool
}

// Margins derives the limits from the maxima of the measured runs.
func Margins(m Measurement, o Options) map[policy.LimitKey]policy.Limit {
	out := map[policy.LimitKey]policy.Limit{
		policy.Timeout: {Value: int64(Ladder(5*m.WallSeconds, timeoutLadder)) * 1000},
		policy.CPU:     {Value: int64(Ladder(5*m.CPUSeconds, cpuLadder))},
		policy.NProc:   {Value: int64(pow2(max(64, 2*m.Tasks+16)))},
		policy.NoFile:  {Value: int64(noFile(m))},
		policy.FsizeMB: {Value: int64(math.Max(16, CeilTo(2*m.LargestFileMB, 16)))},
	}
	switch {
	case o.AddressSpaceUnbounded:
		out[policy.MemMB] = policy.Limit{Off: true}
	case o.HeapPinned:
		out[policy.MemMB] = policy.Limit{Value: int64(math.Max(512, CeilTo(2*m.VMPeakMB, 256)))}
	}
	return out
}

// Signature names the limit a run under limits ran into, or "" when nothing
// points at one: status 124 is the timeout, 153 (SIGXFSZ) fsize_mb, 152
// (SIGXCPU) cpu, 137 cpu when some process's CPU time reached the limit
// less one second; otherwise the first of nofile, nproc, mem_mb among hits
// (the limit refusals of an observed diagnosis run) that the limits set.
func Signature(status int, cpuSeconds float64, limits map[policy.LimitKey]policy.Limit, hits []policy.LimitKey) policy.LimitKey {
	set := func(k policy.LimitKey) bool { l, ok := limits[k]; return ok && !l.Off && l.Value > 0 }
	switch {
	case status == 124 && set(policy.Timeout):
		return policy.Timeout
	case status == 153 && set(policy.FsizeMB):
		return policy.FsizeMB
	case status == 152 && set(policy.CPU):
		return policy.CPU
	case status == 137 && set(policy.CPU) && cpuSeconds >= float64(limits[policy.CPU].Value)-1:
		return policy.CPU
	}
	has := map[policy.LimitKey]bool{}
	for _, h := range hits {
		has[h] = true
	}
	for _, k := range []policy.LimitKey{policy.NoFile, policy.NProc, policy.MemMB} {
		if has[k] && set(k) {
			return k
		}
	}
	return ""
}

// Double returns limits with k doubled.
func Double(limits map[policy.LimitKey]policy.Limit, k policy.LimitKey) map[policy.LimitKey]policy.Limit {
	out := map[policy.LimitKey]policy.Limit{}
	for kk, v := range limits {
		out[kk] = v
	}
	l := out[k]
	l.Value *= 2
	out[k] = l
	return out
}
