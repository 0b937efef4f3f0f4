package enforcer

import (
	"fmt"
	"strings"
	"time"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/landlock"
	"golang.org/x/sys/unix"
)

// Prepared is a policy checked and compiled for this kernel, with its status
// line: what Run would apply. Prepare is Run without running.
type Prepared struct {
	Ruleset *Ruleset
	Hash    string
	rlimits []rlimitV
	timeout time.Duration
	nproc   int64
	memMB   int64
	off     []string // isolation layers switched off
}

// Prepare checks opts against the running kernel and compiles the ruleset,
// refusing (exit 125) everything Run would refuse before starting anything.
func Prepare(opts Options) (*Prepared, error) {
	hash := opts.Hash
	if hash == "" && opts.Policy != nil {
		hash = opts.Policy.Hash()
	}
	if opts.ExpectHash != "" && opts.ExpectHash != hash {
		return nil, errorf(ErrHashMismatch, "policy hash mismatch: the policy hashes to %s, --expect-hash wants %s. Nothing ran.", hash, opts.ExpectHash)
	}
	abi, err := HostABI()
	if err != nil {
		return nil, err
	}
	if abi < landlock.ABIFirst {
		return nil, errorf(ErrNoLandlock, "landlock is not available (ABI %d); refusing to run unprotected. Nothing ran.", abi)
	}
	if abi < opts.RequireABI {
		return nil, errorf(ErrRefused, "this kernel's Landlock ABI is %d, lower than the %d required%s. Nothing ran.",
			abi, opts.RequireABI, gapList(abi, opts.RequireABI))
	}
	row, _ := Row(abi)
	rs, err := Compile(opts.Policy, row, opts.LogSubprocesses, osStat)
	if err != nil {
		return nil, err
	}
	if err := resolvePathRules(rs); err != nil {
		return nil, err
	}
	rs.ABI = abi
	off, err := switchedOff(opts.Without)
	if err != nil {
		return nil, err
	}
	p := &Prepared{Ruleset: rs, Hash: hash, off: off}
	if opts.Policy != nil {
		p.rlimits, p.timeout, p.nproc, p.memMB = limitsOf(opts.Policy.Limits)
		if _, err := opts.Policy.Limits[policy.Timeout].Duration(policy.Timeout); err != nil {
			return nil, errorf(ErrRefused, "%v. Nothing ran.", err)
		}
	}
	return p, nil
}

// StatusLine renders the line written to stderr before the command starts:
//
//	lockstep: OK abi=7 handled=fs,net,scope rules=12 net=tcp-ports hash=sha256:…
//
// followed, when they apply, by log=new-exec, missing=<n> (paths the policy
// names that do not exist here), cgroup=<v2|v1|none:reason> (when nproc or
// mem_mb asks for a cap), unrestricted=<gap,…> (what this ABI cannot
// restrict whatever the policy says: Unrestricted), newer-abi-unhandled
// (a kernel newer than landlock.ABITable) and without=<layer,…> (isolation
// layers switched off). The enforcer child adds unisolated=<layer,…>, the
// layers it could not set up.
func (p *Prepared) StatusLine(cgroup string) string {
	rs := p.Ruleset
	var b strings.Builder
	fmt.Fprintf(&b, "lockstep: OK abi=%d handled=%s rules=%d net=%s hash=%s", rs.ABI, rs.Handled(), rs.Rules(), rs.Net, orNone(p.Hash))
	if rs.Flags&landlock.RestrictLogNewExecOn != 0 {
		b.WriteString(" log=new-exec")
	}
	if len(rs.Missing) > 0 {
		fmt.Fprintf(&b, " missing=%d", len(rs.Missing))
	}
	if cgroup != "" {
		b.WriteString(" cgroup=" + cgroup)
	}
	if gaps := landlock.Unrestricted(rs.ABI); len(gaps) > 0 {
		b.WriteString(" unrestricted=" + landlock.GapNames(gaps))
	}
	if _, newer := Row(rs.ABI); newer {
		b.WriteString(" newer-abi-unhandled")
	}
	if len(p.off) > 0 {
		b.WriteString(" without=" + strings.Join(p.off, ","))
	}
	return b.String()
}

// gapList says which gaps ABI have leaves open that ABI want closes, each
// with what goes unrestricted ("" when none).
func gapList(have, want int) string {
	var parts []string
	for _, g := range landlock.Unrestricted(have) {
		if g.Since() <= want {
			parts = append(parts, fmt.Sprintf("%s (%s; ABI %d)", g.Name, g.What, g.Since()))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "; here stay unrestricted: " + strings.Join(parts, ", ")
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// limitsOf turns [limits] into rlimits, a timeout and the cgroup caps.
func limitsOf(l map[policy.LimitKey]policy.Limit) (rl []rlimitV, timeout time.Duration, nproc, memMB int64) {
	on := func(k policy.LimitKey) (int64, bool) {
		v, ok := l[k]
		if !ok || v.Off || v.Value <= 0 {
			return 0, false
		}
		return v.Value, true
	}
	if _, ok := on(policy.Timeout); ok {
		timeout, _ = l[policy.Timeout].Duration(policy.Timeout) // Prepare refuses what does not fit
	}
	if v, ok := on(policy.CPU); ok {
		rl = append(rl, rlimitV{"cpu", unix.RLIMIT_CPU, uint64(v)})
	}
	if v, ok := on(policy.MemMB); ok {
		rl = append(rl, rlimitV{"mem_mb", unix.RLIMIT_AS, uint64(v) << 20})
		memMB = v
	}
	if v, ok := on(policy.NProc); ok {
		rl = append(rl, rlimitV{"nproc", unix.RLIMIT_NPROC, uint64(v)})
		nproc = v
	}
	if v, ok := on(policy.NoFile); ok {
		rl = append(rl, rlimitV{"nofile", unix.RLIMIT_NOFILE, uint64(v)})
	}
	if v, ok := on(policy.FsizeMB); ok {
		rl = append(rl, rlimitV{"fsize_mb", unix.RLIMIT_FSIZE, uint64(v) << 20})
	}
	return rl, timeout, nproc, memMB
}

func osStat(path string, follow bool) (FileKind, error) {
	var st unix.Stat_t
	var err error
	if follow {
		err = unix.Stat(path, &st)
	} else {
		err = unix.Lstat(path, &st)
	}
	switch {
	case policy.IsMissing(err):
		return KindMissing, nil
	case err != nil:
		return 0, err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return KindDir, nil
	case unix.S_IFLNK:
		return KindSymlink, nil
	}
	return KindFile, nil
}
