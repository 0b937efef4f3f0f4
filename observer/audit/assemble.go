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
	syscalls := map[uint64]*Syscall{}
	byID := map[uint64]*DomainLog{}
	dealloc := map[uint64]*DomainStatus{}
	var accesses []Record
	var problems []string
	for i := range recs {
		r := &recs[i]
		switch r.Type {
		case TypeSyscall:
			s, err := r.Syscall()
			if err == nil {
				syscalls[r.Serial] = &s
			}
		case TypeLandlockDomain:
			d, err := r.Domain()
			if err != nil {
				problems = append(problems, fmt.Sprintf("undecodable domain record: %v", err))
				continue
			}
			switch d.Status {
			case StatusAllocated:
				if _, dup := byID[d.Domain]; !dup && owns(d.Pid) {
					byID[d.Domain] = &DomainLog{Allocated: d}
				}
			case StatusDeallocated:
				dealloc[d.Domain] = &d
			}
		case TypeLandlockAccess:
			accesses = append(accesses, *r)
		}
	}
	for _, r := range accesses {
		a, err := r.Access()
		if err != nil {
			problems = append(problems, fmt.Sprintf("undecodable denial record: %v", err))
			continue
		}
		d, ok := byID[a.Domain]
		if !ok {
			res.Foreign++
			continue
		}
		d.Denials = append(d.Denials, Denial{Access: a, Record: r, Syscall: syscalls[r.Serial]})
	}
	ids := make([]uint64, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		d := byID[id]
		res.Domains = append(res.Domains, d)
		d.Deallocated = dealloc[id]
		switch {
		case d.Deallocated == nil:
			res.Pending = append(res.Pending, id)
			problems = append(problems, fmt.Sprintf("domain %x (pid %d): no deallocation record arrived", id, d.Allocated.Pid))
		case d.Deallocated.Denials != uint64(len(d.Denials)):
			problems = append(problems, fmt.Sprintf("domain %x (pid %d): the kernel counted %d denials, %d records arrived: records were lost or not logged",
				id, d.Allocated.Pid, d.Deallocated.Denials, len(d.Denials)))
		}
	}
	res.Problems = problems
	return res
}
