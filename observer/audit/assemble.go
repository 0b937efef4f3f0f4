package audit

import (
	"fmt"
	"sort"
)

// Denial is one LANDLOCK_ACCESS record of an accepted domain, joined to the
// SYSCALL record of the same event when the task had an audit context.
type Denial struct {
	Access Access
	Record Record
	// Syscall is the SYSCALL record of the same serial; nil when there was
	// none (a task without an audit context, a denial outside a syscall).
	Syscall *Syscall
}

// DomainLog gathers what one accepted Landlock domain logged in a run.
type DomainLog struct {
	// Allocated is the domain's allocated record (its pid is in the run).
	Allocated DomainStatus
	// Denials in arrival order.
	Denials []Denial
	// Deallocated is the domain's deallocated record, the barrier after
	// which no record of the domain can arrive; nil if it has not arrived.
	Deallocated *DomainStatus
}

// Result is what a run's records say once assembled.
type Result struct {
	// Domains the run created (allocated pid owned by the run), by ID.
	Domains []*DomainLog
	// Foreign counts Landlock records of domains the run did not create
	// (another process's, or announced before the run began); they are
	// never read as the run's.
	Foreign int
	// Pending lists accepted domains whose deallocation has not arrived.
	Pending []uint64
	// Problems, when not empty, make the run indeterminate: records were
	// lost, a barrier is missing, a count disagrees.
	Problems []string
}

// Indeterminate reports whether the run's records cannot be trusted as
// complete.
func (r *Result) Indeterminate() bool { return len(r.Problems) > 0 }

// Denials returns every denial of every accepted domain, domain by domain.
func (r *Result) Denials() []Denial {
	var ds []Denial
	for _, d := range r.Domains {
		ds = append(ds, d.Denials...)
	}
	return ds
}

// Assemble joins a run's records (in arrival order): it accepts the domains
// whose allocated record names a pid for which owns is true, attaches their
// denials and the SYSCALL record of each denial's serial, and checks each
// accepted domain's deallocation barrier: it must have arrived, and its
// denials=N must equal the records received for the domain. A record of an
// accepted domain that does not decode is a problem too.
func Assemble(recs []Record, owns func(pid int) bool) *Result {
	res := &Result{}
	a := &assembly{syscalls: map[uint64]*Syscall{}, byID: map[uint64]*DomainLog{}, dealloc: map[uint64]*DomainStatus{}}
	a.read(recs, owns)
	a.attachDenials(res)
	a.checkDomains(res)
	res.Problems = a.problems
	return res
}

// assembly is Assemble's state: the records read, by kind.
type assembly struct {
	syscalls map[uint64]*Syscall      // by serial
	byID     map[uint64]*DomainLog    // the accepted domains
	dealloc  map[uint64]*DomainStatus // deallocation records by domain
	accesses []Record                 // denial records, in arrival order
	problems []string
}

// read sorts the records: SYSCALL records by serial, the domains owns
// accepts, deallocations, and the denials for later.
func (a *assembly) read(recs []Record, owns func(pid int) bool) {
	for i := range recs {
		r := &recs[i]
		switch r.Type {
		case TypeSyscall:
			s, err := r.Syscall()
			if err == nil {
				a.syscalls[r.Serial] = &s
			}
		case TypeLandlockDomain:
			d, err := r.Domain()
			if err != nil {
				a.problems = append(a.problems, fmt.Sprintf("undecodable domain record: %v", err))
				continue
			}
			switch d.Status {
			case StatusAllocated:
				if _, dup := a.byID[d.Domain]; !dup && owns(d.Pid) {
					a.byID[d.Domain] = &DomainLog{Allocated: d}
				}
			case StatusDeallocated:
				a.dealloc[d.Domain] = &d
			}
		case TypeLandlockAccess:
			a.accesses = append(a.accesses, *r)
		}
	}
}

// attachDenials gives each accepted domain its denials, each with the
// SYSCALL record of its serial; others' denials are counted as foreign.
func (a *assembly) attachDenials(res *Result) {
	for _, r := range a.accesses {
		acc, err := r.Access()
		if err != nil {
			a.problems = append(a.problems, fmt.Sprintf("undecodable denial record: %v", err))
			continue
		}
		d, ok := a.byID[acc.Domain]
		if !ok {
			res.Foreign++
			continue
		}
		d.Denials = append(d.Denials, Denial{Access: acc, Record: r, Syscall: a.syscalls[r.Serial]})
	}
}

// checkDomains lists the accepted domains in id order, each with its
// deallocation record, which must have arrived and count its denials.
func (a *assembly) checkDomains(res *Result) {
	ids := make([]uint64, 0, len(a.byID))
	for id := range a.byID {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		d := a.byID[id]
		res.Domains = append(res.Domains, d)
		d.Deallocated = a.dealloc[id]
		switch {
		case d.Deallocated == nil:
			res.Pending = append(res.Pending, id)
			a.problems = append(a.problems, fmt.Sprintf("domain %x (pid %d): no deallocation record arrived", id, d.Allocated.Pid))
		case d.Deallocated.Denials != uint64(len(d.Denials)):
			a.problems = append(a.problems, fmt.Sprintf("domain %x (pid %d): the kernel counted %d denials, %d records arrived: records were lost or not logged",
				id, d.Allocated.Pid, d.Deallocated.Denials, len(d.Denials)))
		}
	}
}
