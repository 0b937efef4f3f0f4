package observer

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// pinOneCPU moves every thread of this process onto the first CPU it may
// run on, so that every process it starts until restore is called runs
// there too: a child inherits the mask of the thread that forked it, and a
// new thread that of its creator. restore gives every thread the CPUs it
// had before.
//
// The observer pins its traced runs only. Under TCG, strace and its
// tracee wake each other at every system call they stop at, and when they
// sit on two vCPUs each wake-up waits for the host to schedule the other
// vCPU's thread: measured on the fixture's observation
// (docs/performance.md), the cross-check and diagnosis runs took 2 to 3
// times as long on two vCPUs as on one. The other runs are better off on
// both (a run under lockstep run is three processes at its start: the
// enforcer, its reaper and the re-executed child; and the observer's own
// threads share the CPU): with everything pinned the joint runs took
// 4.15 s and the reference runs 5.57 s, unpinned 1.86 s and 2.59 s
// (medians of 12 and 9 runs, 3 observations each, alternating), while the
// traced runs took 5.5 s pinned and 7.9 s unpinned.
func pinOneCPU() (restore func() error, err error) {
	set, cpus, err := allowedCPUs()
	if err != nil {
		return nil, err
	}
	if len(cpus) <= 1 {
		return func() error { return nil }, nil
	}
	cpu := cpus[0]
	var one unix.CPUSet
	one.Set(cpu)
	if err := setThreadsAffinity(&one); err != nil {
		return nil, err
	}
	return func() error { return setThreadsAffinity(&set) }, nil
}

// besideCPUs are the CPUs this process may run on but the one pinOneCPU
// keeps for a traced run: where the runs beside it go.
func besideCPUs() ([]int, error) {
	_, cpus, err := allowedCPUs()
	if err != nil || len(cpus) == 0 {
		return nil, err
	}
	return cpus[1:], nil
}

// allowedCPUs is this thread's CPU set and its CPUs in ascending order.
func allowedCPUs() (unix.CPUSet, []int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return set, nil, fmt.Errorf("observe: the CPUs this process may run on: %w", err)
	}
	var cpus []int
	for i := range len(set) * 64 {
		if set.IsSet(i) {
			cpus = append(cpus, i)
		}
	}
	return set, cpus, nil
}

// setThreadsAffinity gives every thread of this process the CPU set.
func setThreadsAffinity(set *unix.CPUSet) error {
	// A thread started while the others were being moved may have been
	// created by one not yet moved: go over them until none is new.
	done := map[int]bool{}
	for round := 0; round < 10; round++ {
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return fmt.Errorf("observe: this process's threads: %w", err)
		}
		moved := 0
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || done[tid] {
				continue
			}
			if err := unix.SchedSetaffinity(tid, set); err != nil && err != unix.ESRCH {
				return fmt.Errorf("observe: set the CPUs of thread %d: %w", tid, err)
			}
			done[tid], moved = true, moved+1
		}
		if moved == 0 {
			return nil
		}
	}
	return nil
}
