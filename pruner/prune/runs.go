package prune

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lockstep-sandbox/lockstep/derive/placement"
	"github.com/lockstep-sandbox/lockstep/enforcer"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/evidence/attribute"
	"github.com/lockstep-sandbox/lockstep/evidence/control"
	"github.com/lockstep-sandbox/lockstep/evidence/strace"
	"github.com/lockstep-sandbox/lockstep/evidence/verdict"
	"github.com/lockstep-sandbox/lockstep/exercise"
	"github.com/lockstep-sandbox/lockstep/pruner/search"
	"github.com/lockstep-sandbox/lockstep/record"
)

// maxEvidence caps the refusals kept per grant in the record.
const maxEvidence = 10

// run runs the exercise once under p behind the enforcer (and strace when
// observed). For an observed run that did not match it returns what its
// confirmed refusals prove.
func (s *state) run(ctx context.Context, stage, shape string, p *policy.Policy, observed bool) (*exercise.Result, *policy.Policy, error) {
	s.runNo++
	n := s.runNo
	s.runs[stage]++
	if err := p.Validate(); err != nil {
		return nil, nil, fmt.Errorf("run %d: the candidate is not a valid policy: %w", n, err)
	}
	data := p.Render()
	cand := filepath.Join(s.scratch, fmt.Sprintf("run-%04d.cfg", n))
	if _, err := policy.Parse(cand, data); err != nil {
		return nil, nil, fmt.Errorf("run %d: the candidate does not parse: %w", n, err)
	}
	if err := os.WriteFile(cand, data, 0o600); err != nil {
		return nil, nil, err
	}
	defer os.Remove(cand)
	prefix := enforcer.Command(s.enforcer, cand)
	trace := filepath.Join(s.scratch, fmt.Sprintf("run-%04d.trace", n))
	if observed {
		prefix = strace.Command(trace, prefix...)
		prefix[0] = s.strace
		defer os.Remove(trace)
	}
	prefix = append(s.coldPrefix(), prefix...)
	res, err := s.ex.Run(ctx, exercise.RunOptions{WorkDir: s.workDir, Prefix: prefix, Timeout: s.opts.RunTimeout, Log: s.lg, Started: s.onStart})
	if err != nil {
		return nil, nil, fmt.Errorf("run %d: %w", n, err)
	}
	s.entry(stage, record.RunEntry{Run: n, Shape: shape, Status: res.Status, Verdict: res.Verdict, Seconds: record.Seconds(res.Duration.Seconds())})
	if line := verdict.Stopped(res.Status, res.BeforeStart()); line != "" {
		return nil, nil, fmt.Errorf("run %d: the enforcer stopped the run before the command started: %s", n, line)
	}
	matched := res.Verdict.Same(s.ref.Verdict)
	s.logf("run %d (%s, %s): status %d, %s", n, stage, shape, res.Status, map[bool]string{true: "same as the reference", false: "differs"}[matched])
	if !observed || matched {
		return res, nil, nil
	}
	grants, err := s.attribute(trace, n, p)
	if err != nil {
		return nil, nil, err
	}
	if res.Status != 0 {
		s.evidence["last_failing_log_tail"] = tail(res.Log, 2000)
	}
	return res, grants, nil
}

type notGranted struct {
	Refusal string `json:"refusal"`
	Layer   string `json:"layer"`
	Reason  string `json:"reason"`
}

// attributor attributes the trace of a run under held. Runs are cold
// (pruner/cold): a file a refused O_CREAT open made outside the working
// directory is gone by now, so the run's own policy says whether the create
// or the file's access was refused.
func attributor(held *policy.Policy) *attribute.Attributor {
	return attribute.New(attribute.Options{Resolve: attribute.ResolveSymlinks,
		CreateHeld: func(dir string) bool { return placement.Covered(held, dir, policy.Create) }})
}

// attribute reads an observed run's trace and returns the grants its
// confirmed refusals prove, recording every refusal.
func (s *state) attribute(trace string, run int, held *policy.Policy) (*policy.Policy, error) {
	tr, err := strace.ParseFileLenient(trace)
	if err != nil {
		return nil, fmt.Errorf("run %d: reading the trace: %w", run, err)
	}
	a := attributor(held)
	var reported, confirmed []string
	var notLandlock, other []notGranted
	var obs []placement.Observation
	var obsWhy []string
	var needs []placement.NetNeed
	var needWhy []string
	var served []placement.Endpoint
	copts := control.Options{PseudoTerminals: s.ex.Config.UsesPseudoTerminals}
	var all []*attribute.Refusal
	defer func() { s.limitHits = limitHitsOf(all) }()
	for _, c := range tr.Calls {
		if c.InDomain && !c.Failed() && c.Name == "bind" && len(c.Args) > 1 {
			if sa, ok := c.Args[1].SockAddr(); ok && sa.Port > 0 {
				served = append(served, placement.Endpoint{Port: sa.Port, Transport: policy.TCP}, placement.Endpoint{Port: sa.Port, Transport: policy.UDP})
			}
		}
		r := a.Observe(c)
		if r == nil {
			continue
		}
		all = append(all, r)
		desc := fmt.Sprintf("run %d line %d: %s", run, c.Line, r)
		reported = append(reported, desc)
		if !r.Layer.Grantable() {
			other = append(other, notGranted{desc, string(r.Layer), r.Reason})
			continue
		}
		v := control.Replay(control.WithInterpreter(r), copts)
		if !v.Landlock {
			notLandlock = append(notLandlock, notGranted{desc, string(r.Layer), v.Reason})
			continue
		}
		desc = fmt.Sprintf("run %d line %d: %s", run, c.Line, v.Refusal)
		confirmed = append(confirmed, desc)
		for _, nd := range v.Refusal.Needs {
			nd.Path = attribute.ResolveSymlinks(nd.Path)
			for _, sec := range nd.Sections {
				obs = append(obs, placement.Observation{Path: nd.Path, Section: sec, Run: run, TGID: c.TGID, TID: c.PID})
				obsWhy = append(obsWhy, desc)
				if sec == policy.Execute {
					s.executed[nd.Path] = true
					s.addBecause(search.Item{Section: policy.Execute, Path: nd.Path}, desc)
				}
			}
		}
		for _, nn := range r.Net {
			needs = append(needs, placement.NetNeed{Section: nn.Section, Addr: nn.Addr, Port: nn.Port, Transport: nn.Transport})
			needWhy = append(needWhy, desc)
		}
	}
	grants, reports := placement.Grants(obs, s.env(held))
	net := placement.NetworkRules(needs, served, s.abi)
	gp := &policy.Policy{}
	placement.Add(gp, grants)
	gp.Connect, gp.Bind = net.Connect, net.Bind
	for _, g := range grants {
		it := search.Item{Section: g.Section, Path: g.Path}
		for i, o := range obs {
			if o.Section == g.Section && (o.Path == g.Path || o.Path == g.Object || policy.Beneath(o.Path, g.Path)) {
				s.addBecause(it, obsWhy[i])
			}
		}
	}
	for _, r := range net.Connect {
		for i, nn := range needs {
			if nn.Section == policy.Connect && nn.Transport == r.Transport {
				s.addBecause(search.Item{Section: policy.Connect, Rule: r.String()}, needWhy[i])
			}
		}
	}
	for _, r := range net.Bind {
		for i, nn := range needs {
			if nn.Section == policy.Bind && nn.Transport == r.Transport && nn.Port == r.Port {
				s.addBecause(search.Item{Section: policy.Bind, Rule: r.String()}, needWhy[i])
			}
		}
	}
	var reps []string
	for _, r := range reports {
		reps = append(reps, r.String())
	}
	reps = append(reps, net.Reports...)
	s.entry("denials", map[string]any{"run": run, "reported": nonNil(reported), "confirmed": nonNil(confirmed),
		"not_landlock": nonNilNG(notLandlock), "not_granted": nonNilNG(other), "ungranted_needs": nonNil(reps),
		"grants": nonNil(search.Describe(search.Items(gp))), "trace_errors": len(tr.Errors)})
	if len(net.RefusedExternal) > 0 {
		s.entry("network denials", map[string]any{"refused_external": net.RefusedExternal})
		return nil, &search.AbortError{Reason: "needs external network: undeclared " + strings.Join(net.RefusedExternal, ", ")}
	}
	return gp, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNilNG(s []notGranted) []notGranted {
	if s == nil {
		return []notGranted{}
	}
	return s
}

func (s *state) addBecause(it search.Item, why string) {
	for _, w := range s.because[it] {
		if w == why {
			return
		}
	}
	if len(s.because[it]) < maxEvidence {
		s.because[it] = append(s.because[it], why)
	}
}

// existed says whether p existed before the prune started: beneath the
// working directory, in the exercise's own folder (every run starts from a
// fresh copy); elsewhere, a file that exists now and was born (statx btime,
// or changed, ctime, where the file system keeps no birth time) before the
// prune's first run. A file a run created, such as a compiler's random name
// in /tmp, therefore never counts as pre-existing.
func (s *state) existed(p string) (bool, bool) {
	if p == s.workDir || policy.Beneath(p, s.workDir) {
		rel, _ := filepath.Rel(s.workDir, p)
		fi, err := os.Lstat(filepath.Join(s.ex.Dir, rel))
		if err != nil {
			return false, false
		}
		return true, fi.IsDir()
	}
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, p, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BTIME|unix.STATX_CTIME|unix.STATX_TYPE, &st); err != nil {
		return false, false
	}
	born := st.Ctime
	if st.Mask&unix.STATX_BTIME != 0 {
		born = st.Btime
	}
	if time.Unix(born.Sec, int64(born.Nsec)).After(s.started) {
		return false, false
	}
	return true, st.Mode&unix.S_IFMT == unix.S_IFDIR
}

func (s *state) env(held *policy.Policy) placement.Env {
	scanned := []string{s.workDir}
	if held != nil {
		for q, secs := range held.FS {
			if q == s.workDir || policy.Beneath(q, s.workDir) || policy.Beneath(s.workDir, q) {
				continue
			}
			for sec, on := range secs {
				if on && policy.IsWriteClass(sec) {
					if ok, dir := s.existed(q); ok && dir {
						scanned = append(scanned, q)
					}
					break
				}
			}
		}
	}
	return placement.Env{Existed: s.existed, Scanned: scanned, CompiledPrograms: s.ex.CompiledProgramsPath(s.workDir),
		Pinned: s.pinnedPaths(), PseudoTerminals: s.ex.Config.UsesPseudoTerminals}
}

// prepare is applied to every candidate before it runs: execute narrowing,
// then the hierarchy rule.
func (s *state) prepare(p *policy.Policy) (*policy.Policy, error) {
	var executed []string
	for x := range s.executed {
		executed = append(executed, x)
	}
	q, _ := placement.NarrowExecute(p, nil, executed, s.env(p))
	return q.NormaliseHierarchy()
}

func (s *state) grow(ctx context.Context, start *policy.Policy) (*search.GrowResult, error) {
	g, err := search.Grow(ctx, search.GrowOptions{
		Start:   start,
		Rounds:  s.opts.Rounds,
		Prepare: s.prepare,
		Run: func(ctx context.Context, p *policy.Policy, observed bool) (search.Outcome, error) {
			shape := "OBSERVED_FILESYSTEM"
			if !observed {
				shape = "UNOBSERVED_FILESYSTEM"
			}
			res, grants, err := s.run(ctx, "filesystem", shape, p, observed)
			if err != nil {
				return search.Outcome{}, err
			}
			return search.Outcome{Matched: res.Verdict.Same(s.ref.Verdict), Grants: grants}, nil
		},
	})
	if g != nil {
		var added []string
		for _, r := range g.Added {
			added = append(added, search.Describe(r)...)
		}
		s.entry("grow", map[string]any{"rounds": g.Rounds, "reruns": g.Reruns, "grants": nonNil(added)})
	}
	if err != nil {
		return nil, err
	}
	return g, nil
}

// minimise compacts and minimises the grown policy; the kept seed's rows
// take no part (every candidate grants them).
func (s *state) minimise(ctx context.Context, g *search.GrowResult, start *policy.Policy) (*policy.Policy, error) {
	grown := search.Build(s.withoutKept(search.Items(g.Policy)), g.Policy)
	before := search.Items(grown)
	compacted, widened := placement.Compact(grown, nil, DefaultThreshold, s.env(g.Policy))
	items := search.Items(compacted)
	// A compacted parent stands on its children's refusals.
	for _, it := range items {
		if len(s.because[it]) > 0 || it.Path == "" {
			continue
		}
		for _, b := range before {
			if b.Section == it.Section && policy.Beneath(b.Path, it.Path) {
				for _, w := range s.because[b] {
					s.addBecause(it, w)
				}
			}
		}
	}
	s.entry("compaction", map[string]any{"before": len(before), "after": len(items), "widened": nonNil(widened)})
	// Order: seed items, then by the grow round that added them, so the
	// grow history's failed policies line up with whole blocks.
	covering := func(it search.Item) search.Item {
		for _, c := range items {
			if c == it || (c.Path != "" && c.Section == it.Section && policy.Beneath(it.Path, c.Path)) {
				return c
			}
		}
		return it
	}
	seen := map[search.Item]bool{}
	var ordered []search.Item
	add := func(it search.Item) {
		c := covering(it)
		if !seen[c] {
			seen[c] = true
			ordered = append(ordered, c)
		}
	}
	for _, it := range s.withoutKept(search.Items(start)) {
		add(it)
	}
	for _, r := range g.Added {
		for _, it := range s.withoutKept(r) {
			add(it)
		}
	}
	for _, it := range items {
		add(it)
	}
	var known [][]search.Item
	for _, p := range g.Failed {
		known = append(known, s.withoutKept(search.Items(p)))
	}
	try := func(ctx context.Context, kept []search.Item) (bool, error) {
		cand, err := s.prepare(s.withKept(kept, compacted))
		if err != nil {
			return false, err
		}
		res, _, err := s.run(ctx, "minimisation", "UNOBSERVED_FILESYSTEM", cand, false)
		if err != nil {
			return false, err
		}
		return res.Verdict.Same(s.ref.Verdict), nil
	}
	kept, st, err := search.Minimise(ctx, ordered, known, try)
	s.minStats = st
	s.entry("filesystem minimisation", map[string]any{"before": st.Before, "kept": st.Kept, "trials": st.Trials,
		"runs": st.Runs, "skipped": st.Skipped, "removed": nonNil(search.Describe(st.Removed))})
	if err != nil {
		return nil, err
	}
	s.kept, s.removed, s.template = kept, st.Removed, compacted
	return s.prepare(s.withKept(kept, compacted))
}

// verify runs the final policy VerificationRuns times with every layer on.
func (s *state) verify(ctx context.Context, p *policy.Policy) (*policy.Policy, error) {
	n := s.opts.VerificationRuns
	if n <= 0 {
		n = DefaultVerificationRuns
	}
	ok, err := s.joint(ctx, p, n)
	if err != nil || ok {
		return p, err
	}
	if len(s.removed) == 0 {
		return nil, &search.AbortError{Reason: "the joint verification failed"}
	}
	restored, err := s.prepare(s.withKept(append(append([]search.Item(nil), s.kept...), s.removed...), s.template))
	if err != nil {
		return nil, err
	}
	restored.Limits = p.Limits
	s.entry("minimisation unstable", map[string]any{"restored": search.Describe(s.removed)})
	ok, err = s.joint(ctx, restored, n)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, &search.AbortError{Reason: "the joint verification failed, also with every grant minimisation removed restored"}
	}
	return restored, nil
}

func (s *state) joint(ctx context.Context, p *policy.Policy, n int) (bool, error) {
	for i := 0; i < n; i++ {
		res, _, err := s.run(ctx, "verification", "JOINT", p, false)
		if err != nil {
			return false, err
		}
		if !res.Verdict.Same(s.ref.Verdict) {
			s.evidence["verification_log_tail"] = tail(res.Log, 2000)
			return false, nil
		}
	}
	return true, nil
}

type grantEvidence struct {
	Grant         string   `json:"grant"`
	Refusals      []string `json:"refusals"`
	InheritedFrom string   `json:"inherited_from,omitempty"`
}

// grantsEntry records, for every grant of p, the refusals behind it. A grant
// with none is a defect of the pruner: the prune aborts.
func (s *state) grantsEntry(p *policy.Policy) {
	var out []grantEvidence
	var missing []string
	for _, it := range search.Items(p) {
		e := grantEvidence{Grant: it.String(), Refusals: nonNil(s.because[it])}
		if len(e.Refusals) == 0 && it.Path != "" {
			for _, a := range policy.Ancestors(it.Path) {
				if p.FS[a][it.Section] {
					e.InheritedFrom = a
				}
			}
		}
		if len(e.Refusals) == 0 && e.InheritedFrom == "" {
			missing = append(missing, it.String())
		}
		out = append(out, e)
	}
	s.entry("grants", map[string]any{"grants": out})
	if len(missing) > 0 {
		s.missingEvidence = missing
	}
}

// minimality drops each grant of p in turn (the hierarchy rule applied, so
// a grant an ancestor implies is not a grant of its own) and runs the
// exercise once: a run that still matches names a grant that is not needed.
func (s *state) minimality(ctx context.Context, p *policy.Policy) error {
	items := search.Items(p)
	var needed, notNeeded, implied []string
	for i, it := range items {
		rest := append(append([]search.Item(nil), items[:i]...), items[i+1:]...)
		q, err := search.Build(rest, p).NormaliseHierarchy()
		if err != nil {
			return err
		}
		if q.Hash() == p.Hash() {
			implied = append(implied, it.String())
			continue
		}
		res, _, err := s.run(ctx, "minimality", "JOINT", q, false)
		if err != nil {
			return err
		}
		if res.Verdict.Same(s.ref.Verdict) {
			notNeeded = append(notNeeded, it.String())
		} else {
			needed = append(needed, it.String())
		}
	}
	s.entry("minimality", map[string]any{"needed": nonNil(needed), "not_needed": nonNil(notNeeded), "implied": nonNil(implied)})
	return nil
}

// withKept builds a policy granting items and the kept seed's rows, with
// template's details (search.Build) and the kept rows' comments.
func (s *state) withKept(items []search.Item, template *policy.Policy) *policy.Policy {
	p := search.Build(append(append([]search.Item(nil), items...), s.keptItems...), template)
	for q, c := range s.keptComments {
		if p.Comments == nil {
			p.Comments = map[string]string{}
		}
		p.Comments[q] = c
	}
	return p
}

// withoutKept is items without the kept seed's rows.
func (s *state) withoutKept(items []search.Item) []search.Item {
	var out []search.Item
	for _, it := range items {
		keep := true
		for _, k := range s.keptItems {
			if it == k {
				keep = false
				break
			}
		}
		if keep {
			out = append(out, it)
		}
	}
	return out
}
