package placement

import (
	"fmt"
	"path"
	"sort"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

// overlapsWrite reports whether any write-class right sits on dir, an
// ancestor of it or an entry beneath it, in any of ps.
func overlapsWrite(dir string, ps ...*policy.Policy) bool {
	for _, p := range ps {
		if p == nil {
			continue
		}
		for q, secs := range p.FS {
			if q != dir && !policy.Beneath(q, dir) && !policy.Beneath(dir, q) {
				continue
			}
			for s, on := range secs {
				if on && policy.IsWriteClass(s) {
					return true
				}
			}
		}
	}
	return false
}

// NarrowExecute takes [execute] off every directory of p that overlaps a
// write-class right (on itself, an ancestor or beneath it, in p or held),
// except inside env.CompiledPrograms, so nothing the run can write is
// executable. Each executed object beneath such a directory that no remaining
// entry lets execute gets [execute] on itself, if it existed before the run
// and is nameable; otherwise it is reported. p is not changed.
func NarrowExecute(p, held *policy.Policy, executed []string, env Env) (*policy.Policy, []Report) {
	out := p.Clone()
	if out.Comments == nil {
		out.Comments = map[string]string{}
	}
	var narrowed []string
	for q, secs := range out.FS {
		if !secs[policy.Execute] {
			continue
		}
		ok, dir := env.existed(q)
		if ok && !dir {
			continue // a file: handled below if it can be overwritten
		}
		if !overlapsWrite(q, out, held) {
			continue
		}
		if env.inCompiled(q) {
			out.Comments[q] = "execute: kept on this directory beside a write-class right, because the exercise declares runs_compiled_programs"
			continue
		}
		delete(secs, policy.Execute)
		if len(secs) == 0 {
			delete(out.FS, q)
			delete(out.Comments, q)
		}
		narrowed = append(narrowed, q)
	}
	sort.Strings(narrowed)
	var reports []Report
	for _, x := range uniqueSorted(append([]string(nil), executed...)) {
		var under string
		for _, d := range narrowed {
			if policy.Beneath(x, d) || x == d {
				under = d
				break
			}
		}
		if under == "" || Covered(out, x, policy.Execute) {
			continue
		}
		ok, dir := env.existed(x)
		if !ok || dir || !Carriable(x) {
			reports = append(reports, Report{x, policy.Execute, "executed beneath " + under + ", which overlaps a write-class right; not a pre-existing nameable file, so not granted"})
			continue
		}
		if out.FS[x] == nil {
			out.FS[x] = map[policy.Section]bool{}
		}
		out.FS[x][policy.Execute] = true
		c := fmt.Sprintf("execute: kept on the files the reference executed, because %s overlaps a write-class right; a file written there is not executable", under)
		if overlapsWrite(x, out, held) {
			c += ", but this file itself can be overwritten in place"
		}
		out.Comments[x] = c
	}
	return out, reports
}

// Compact repeatedly replaces threshold or more read-class entries that share
// a parent and the same sections by that parent (which keeps its own
// rights), unless the parent is inside a fine-grained root, shallower than
// MinimumDepth, or the sections include [execute] and the parent overlaps a
// write-class right (in the policy or held). A pinned read root is never
// one of the entries: it stays its own entry, never widened to its parent.
// threshold below 2 is 2. It
// returns the new policy and the parents it widened to.
func Compact(p, held *policy.Policy, threshold int, env Env) (*policy.Policy, []string) {
	if threshold < 2 {
		threshold = 2
	}
	out := p.Clone()
	var widened []string
	for {
		changed := false
		for _, qs := range siblingGroups(out, threshold) {
			if qs = env.unpinned(qs); len(qs) < threshold {
				continue
			}
			parent := path.Dir(qs[0])
			secs := out.FS[qs[0]]
			if env.InFineRoot(parent) || Depth(parent) < MinimumDepth {
				continue
			}
			if secs[policy.Execute] && !env.inCompiled(parent) && overlapsWrite(parent, out, held) {
				continue
			}
			widenTo(out, parent, qs)
			widened = append(widened, parent)
			changed = true
		}
		if !changed {
			break
		}
	}
	sort.Strings(widened)
	return out, widened
}

// siblingGroups are the groups of threshold or more read-class entries of
// p (not /) that share a parent and the same sections, in a fixed order.
func siblingGroups(p *policy.Policy, threshold int) [][]string {
	groups := map[string][]string{}
	for q, secs := range p.FS {
		if len(secs) == 0 {
			continue
		}
		readOnly := true
		for s, on := range secs {
			if on && !IsReadClass(s) {
				readOnly = false
			}
		}
		if !readOnly || q == "/" {
			continue
		}
		k := path.Dir(q) + "\x00" + policy.Letters(secs)
		groups[k] = append(groups[k], q)
	}
	var keys []string
	for k, qs := range groups {
		if len(qs) >= threshold {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := make([][]string, len(keys))
	for i, k := range keys {
		out[i] = groups[k]
	}
	return out
}

// widenTo replaces the entries qs of p by their parent, which gets their
// sections besides its own.
func widenTo(p *policy.Policy, parent string, qs []string) {
	add := map[policy.Section]bool{}
	for s, on := range p.FS[qs[0]] {
		if on {
			add[s] = true
		}
	}
	for _, q := range qs {
		delete(p.FS, q)
		delete(p.Comments, q)
	}
	if p.FS[parent] == nil {
		p.FS[parent] = map[policy.Section]bool{}
	}
	for s := range add {
		p.FS[parent][s] = true
	}
}

// unpinned is qs without the pinned read roots.
func (e Env) unpinned(qs []string) []string {
	var out []string
	for _, q := range qs {
		if e.pinnedRoot(q) != q {
			out = append(out, q)
		}
	}
	return out
}
