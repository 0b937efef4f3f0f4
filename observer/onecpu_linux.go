package observer

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// pinOneCPU moves every thread of this process onto the first CPU it may
// run on, so that every process it starts from now on (the exercise's
// runs, strace and its tracees, the probes) runs there too: a child
// inherits the mask of the thread that forked it, and a new thread that of
// its creator.
//
// The observer's runs are sequential, so a second vCPU gives them nothing,
// but under TCG it costs the traced runs dearly: strace and its tracee wake
// each other at every system call, and when they sit on two vCPUs each
// wake-up waits for the host to schedule the other vCPU's thread. Measured
// on the fixture's observation (docs/performance.md), the cross-check and
// diagnosis runs took 2 to 3 times as long on two vCPUs as on one.
func pinOneCPU() error {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return fmt.Errorf("observe: the CPUs this process may run on: %w", err)
	}
	cpu := -1
	for i := 0; i < len(set)*64 && cpu < 0; i++ {
		if set.IsSet(i) {
			cpu = i
		}
	}
	if cpu < 0 {
		return nil
	}
	var one unix.CPUSet
	one.Set(cpu)
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
			if err := unix.SchedSetaffinity(tid, &one); err != nil && err != unix.ESRCH {
				return fmt.Errorf("observe: move thread %d to CPU %d: %w", tid, cpu, err)
			}
			done[tid], moved = true, moved+1
		}
		if moved == 0 {
			return nil
		}
	}
	return nil
}
