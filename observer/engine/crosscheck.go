package engine

import (
	"fmt"
	"slices"
	"sort"
	"strconv"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/evidence/attribute"
	"github.com/lockstep-sandbox/lockstep/landlock"
	"github.com/lockstep-sandbox/lockstep/observer/audit"
	"github.com/lockstep-sandbox/lockstep/observer/kvmrecord"
)

// Comparison is the outcome of joining one run's strace refusals with its
// audit records.
type Comparison struct {
	// Compared are the strace refusals taken into the comparison (attributed
	// to Landlock and confirmed by the control replay), Records the audit
	// denials (filesystem and network blockers of the run's own domains).
	Compared, Records int
	// Matched pairs each matched strace refusal with its records.
	Matched    []Match
	Mismatches []kvmrecord.Mismatch
	AuditOnly  []kvmrecord.AuditOnly
}

// Match is one strace refusal and the record(s) of the same event that
// agree with it (a rename refused on both parents logs two).
type Match struct {
	Refusal *attribute.Refusal
	Records []*audit.Denial
}

// CrossCheck joins strace refusals with audit denials. Each refusal, visited
// by number of rights ascending (a refusal asking for more cannot take the
// record meant for one asking for less), then by trace line, takes the first
// unmatched record that
//
//  1. joins on (process, system call) through the record's SYSCALL record:
//     its pid is the refused call's thread group, its syscall number that
//     call's name on the record's architecture, and then
//  2. agrees on object and rights: the path is one of the refusal's objects
//     (a network record: the port and transport of one of its rules) and
//     every blocker is among the refusal's rights (the kernel names only the
//     rights the domain lacked; strace's call may have asked for more).
//
// Further records of the same event that agree are consumed with it. A
// device ioctl refused with EACCES (attribute.Fixed: the pruner grants none)
// takes an fs.ioctl_dev record on its device, and is dropped without one. A
// filesystem or network refusal with no partner is a mismatch; a record nobody took is audit-only.
// A record without a SYSCALL record can never join.
//
// strace names an object as the program spelled it, the kernel as it
// resolved it: a filesystem object agrees under either spelling, its
// resolved one being KernelPath's for the refused call's process, with
// readlink (nil: os.Readlink) reading the links as they are now.
func CrossCheck(refusals []*attribute.Refusal, denials []audit.Denial, readlink Readlink) *Comparison {
	c := &Comparison{Compared: len(refusals), Mismatches: []kvmrecord.Mismatch{}, AuditOnly: []kvmrecord.AuditOnly{}}
	var recs []*denial
	for i := range denials {
		d := &denials[i]
		if !comparable(d) {
			continue
		}
		recs = append(recs, &denial{Denial: d})
	}
	c.Records = len(recs)
	order := slices.Clone(refusals)
	sort.SliceStable(order, func(i, j int) bool {
		if len(order[i].Rights) != len(order[j].Rights) {
			return len(order[i].Rights) < len(order[j].Rights)
		}
		return line(order[i]) < line(order[j])
	})
	for _, r := range order {
		objs := kernelObjects(r, readlink)
		var first *denial
		for _, d := range recs {
			if !d.used && joins(r, d.Denial) && agrees(r, objs, d.Denial) {
				first = d
				break
			}
		}
		if first == nil && r.Layer == attribute.Fixed {
			// Not attributed to Landlock by the pruner: only a record
			// makes it one.
			c.Compared--
			continue
		}
		if first == nil {
			c.Mismatches = append(c.Mismatches, mismatch(r, objs, recs))
			continue
		}
		m := Match{Refusal: r}
		for _, d := range recs {
			if d == first || (!d.used && sameEvent(d.Denial, first.Denial) && joins(r, d.Denial) && agrees(r, objs, d.Denial)) {
				d.used = true
				m.Records = append(m.Records, d.Denial)
			}
		}
		c.Matched = append(c.Matched, m)
	}
	for _, d := range recs {
		if !d.used {
			c.AuditOnly = append(c.AuditOnly, kvmrecord.AuditOnly{Objects: objects(d.Denial), Sections: sections(d.Access.Blockers)})
		}
	}
	return c
}

// Record returns the comparison as the .abi10.json's cross_check. Its
// unparsed list (damaged 1423 lines, a field the schema keeps) is always
// empty: here a
// Landlock record that does not decode makes the run's records untrusted
// and the run aborts (JudgeAudit), as a trace line that does not parse does
// (JudgeTrace), so no written comparison ever skipped one.
func (c *Comparison) Record() *kvmrecord.CrossCheck {
	return &kvmrecord.CrossCheck{StraceDenials: c.Compared, AuditRecords: c.Records, Unparsed: []string{},
		Mismatches: c.Mismatches, AuditOnly: c.AuditOnly}
}

type denial struct {
	*audit.Denial
	used bool
}

func line(r *attribute.Refusal) int {
	if r.Call == nil {
		return 0
	}
	return r.Call.Line
}

// comparable reports whether a denial names a filesystem or network right
// (scope and implicit restrictions have no strace counterpart).
func comparable(d *audit.Denial) bool {
	for _, b := range d.Access.Blockers {
		if c := landlock.Right(b).Class(); c == landlock.ClassFS || c == landlock.ClassNet {
			return true
		}
	}
	return false
}

// joins reports whether the denial's SYSCALL record names the refused call's
// process and system call.
func joins(r *attribute.Refusal, d *audit.Denial) bool {
	if d.Syscall == nil || r.Call == nil {
		return false
	}
	if d.Syscall.Pid != r.Call.TGID && d.Syscall.Pid != r.Call.PID {
		return false
	}
	name, ok := SyscallName(d.Syscall.Arch, d.Syscall.Nr)
	return ok && name == r.Call.Name
}

// kernelObjects are a filesystem refusal's objects under both spellings:
// as strace saw them and as the kernel resolved them for the refused call's
// process (KernelPath).
func kernelObjects(r *attribute.Refusal, readlink Readlink) []string {
	objs := slices.Clone(r.Paths)
	if r.Layer != attribute.Filesystem || r.Call == nil {
		return objs
	}
	for _, p := range r.Paths {
		if k := KernelPath(p, r.Call.TGID, r.Call.PID, readlink); !slices.Contains(objs, k) {
			objs = append(objs, k)
		}
	}
	return objs
}

// agrees reports whether the denial's object (one of objs, the refusal's
// objects under both spellings) and rights agree with the refusal's.
func agrees(r *attribute.Refusal, objs []string, d *audit.Denial) bool {
	a := &d.Access
	if len(a.Blockers) == 0 {
		return false
	}
	switch r.Layer {
	case attribute.Filesystem:
		if a.Path == "" || !slices.Contains(objs, a.Path) {
			return false
		}
		for _, b := range a.Blockers {
			if !slices.Contains(r.Rights, attribute.Right(b)) {
				return false
			}
		}
		return true
	case attribute.Network:
		for _, n := range r.Net {
			if slices.Equal(a.Blockers, []string{string(n.Right)}) && NetPort(a, n.Section) == n.Port {
				return true
			}
		}
	case attribute.Fixed:
		// A device ioctl no policy of the pruner's grants (Run
		// passes only those refused with EACCES).
		return r.Op == "ioctl" && slices.Contains(objs, a.Path) && slices.Equal(a.Blockers, []string{string(landlock.IoctlDev)})
	}
	return false
}

// NetPort is the port a network record names: the address a bind asked for
// (src=, or lport= of an autobind), the one a connect or send asked for (dest=).
func NetPort(a *audit.Access, s policy.Section) int {
	if s == policy.Bind {
		if a.Src != 0 {
			return int(a.Src)
		}
		return int(a.LPort)
	}
	if a.Dest != 0 {
		return int(a.Dest)
	}
	return int(a.FPort)
}

func sameEvent(a, b *audit.Denial) bool {
	return a.Record.Serial == b.Record.Serial && a.Record.Sec == b.Record.Sec && a.Record.Milli == b.Record.Milli
}

func mismatch(r *attribute.Refusal, objs []string, recs []*denial) kvmrecord.Mismatch {
	m := kvmrecord.Mismatch{Operation: r.Op, Objects: refusalObjects(r), Sections: sectionNames(r.Sections), AuditForObject: [][]string{}}
	if r.Layer == attribute.Network {
		m.Sections = nil
		for _, n := range r.Net {
			m.Sections = append(m.Sections, string(n.Section))
		}
		m.Sections = UniqueSorted(m.Sections)
	}
	for _, d := range recs {
		if d.used {
			continue
		}
		for _, o := range objects(d.Denial) {
			if slices.Contains(m.Objects, o) || slices.Contains(objs, o) {
				m.AuditForObject = append(m.AuditForObject, sections(d.Access.Blockers))
				break
			}
		}
	}
	return m
}

// refusalObjects names a refusal's objects: its paths, or "<port>/<transport>"
// for each network rule.
func refusalObjects(r *attribute.Refusal) []string {
	if r.Layer != attribute.Network {
		return append([]string{}, r.Paths...)
	}
	var o []string
	for _, n := range r.Net {
		o = append(o, strconv.Itoa(n.Port)+"/"+string(n.Transport))
	}
	return UniqueSorted(o)
}

// objects names a record's object as refusalObjects does.
func objects(d *audit.Denial) []string {
	a := &d.Access
	if a.Path != "" {
		return []string{a.Path}
	}
	for _, b := range a.Blockers {
		r := landlock.Right(b)
		if r.Class() != landlock.ClassNet {
			continue
		}
		return []string{fmt.Sprintf("%d/%s", NetPort(a, policy.Section(r.Section())), r.Transport())}
	}
	return []string{}
}

// sections maps blockers to the sorted, distinct sections that grant them
// (landlock.Right.Section); a blocker no section grants (make_char,
// make_block, a scope) adds none.
func sections(blockers []string) []string {
	var s []string
	for _, b := range blockers {
		if sec := landlock.Right(b).Section(); sec != "" {
			s = append(s, sec)
		}
	}
	return UniqueSorted(s)
}

func sectionNames(secs []policy.Section) []string {
	s := make([]string, 0, len(secs))
	for _, sec := range secs {
		s = append(s, string(sec))
	}
	return UniqueSorted(s)
}

// UniqueSorted sorts s in place and drops its duplicates; nil becomes an
// empty list, which JSON writes as [].
func UniqueSorted(s []string) []string {
	if s == nil {
		return []string{}
	}
	sort.Strings(s)
	return slices.Compact(s)
}
