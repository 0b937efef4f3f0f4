// Package limits measures what an exercise uses and derives the [limits] of
// its policy with margins.
//
// A Sampler watches one run's process tree (the process the run started
// and its descendants, the enforcer itself not counted) ten times a
// second: VmPeak, user+system CPU time, the highest open descriptor, the
// most descriptors one process held and the number of threads of the
// whole tree. One run's
// Measurement adds its wall time and the largest file it left under the
// write-class grants. Margins turns the maxima of three runs into limits:
//
//	timeout   5 × wall up to the next of 60 120 300 600 900 1200 1800 2700 3600 s
//	cpu       5 × cpu up to the next of 30 60 120 300 600 900 1200 1800 3600 s
//	nproc     max(64, 2 × tasks + 16), up to a power of two
//	nofile    max(256, highest_fd + 1, 2 × open_fds), up to a power of two
//	fsize_mb  max(16, ceil_to(2 × largest_file_mb, 16))
//	mem_mb    heap_pinned only: max(512, ceil_to(2 × vm_peak_mb, 256));
//	          address_space_unbounded: 0 (off); otherwise not written
//
// Signature names the limit a failed run under limits ran into (status 124
// timeout, 153 SIGXFSZ fsize_mb, 152 SIGXCPU or a SIGKILL at the CPU limit
// cpu, else the limit refusals of an observed diagnosis run: EMFILE nofile,
// EAGAIN from clone/fork nproc, ENOMEM mem_mb); the pipeline doubles it, at
// most three times per limit.
//
// The time limits depart from Phobos's max(60, ceil_to(5 × wall, 30)) and
// max(30, ceil_to(5 × cpu, 10)): run times vary between prunes by more than
// those steps, so two prunes of one exercise disagreed in [limits] alone;
// the ladders' rungs are far enough apart that they agree. nofile departs
// from Phobos's max(256, 2 × (highest_fd + 1)) for the same reason: bash
// holds a script at fd 255 whatever it needs, and whether a sample caught
// it decided between 256 and 512; the margin is on the count instead.
// Both counts are rounded up to a power of two (Phobos: not rounded): a
// JVM's thread and open-jar counts vary by a few between runs, and a prune
// should not differ from the last in nproc=176 against nproc=186.
//
// # Limitations
//
// CPU times are read in clock ticks of 100 Hz (USER_HZ on every Linux
// architecture lockstep supports). A process that lives less than one
// sampling interval may be missed; the margins absorb that.
package limits
