// Package enforcer applies a lockstep policy to one command on the running
// kernel: a Landlock ruleset that handles every access right the kernel's ABI
// knows (so whatever the policy does not grant is refused), TCP and UDP port
// rules, IPC scoping, audit logging flags, rlimits, cgroup caps, a timeout
// that kills the whole process group, isolation layers beside Landlock
// (Layers: namespaces and read-only mounts), and one status line.
//
// # How a command runs
//
// Run never restricts its caller. It checks the policy against the kernel
// (Prepare: a rule the kernel cannot enforce is a refusal, exit 125, naming
// the rule and the ABI it needs; never a silent no-op), then re-executes the
// current binary with LOCKSTEP_ROLE=enforcer-child. That child (ChildMain)
// is cloned into the command's v2 cgroup (clone3 CLONE_INTO_CGROUP; v1
// cgroups it joins) and into new PID, IPC, UTS and mount namespaces (a user
// namespace too when not root), under a small init that is PID 1 of the
// PID namespace (a /bin/sh script, initScript; InitMain without one),
// writes the cgroup's pids.max once its own threads are up, sets up the
// isolation layers (every mount read-only but the paths the policy lets
// the command change, a /proc of its own, vm.memfd_noexec=2), restricts
// itself with go-landlock and executes the command in its own process
// group; no thread of the parent is ever in the
// command's Landlock domain, so its scopes keep the command from the
// parent (signals, ptrace). The parent waits, enforces the timeout, watches
// the cgroup caps, and kills whatever the command leaves behind, in its
// process group and in its cgroup (a containment cgroup v2 when no cap needs
// one, so even a setsid escape dies); when the init exits the kernel kills
// whatever is left in the PID namespace.
//
// # Isolation layers
//
// Landlock does not restrict a file's metadata, the system calls that name
// another process by pid, System V IPC or the execution of a memfd. Layers
// lists what Run adds for that: mounts, pid, ipc, uts, memfd.
// Options.Without switches layers off (the status line says without=); a
// layer that cannot be had here is named (unisolated=), or refused with
// Options.RequireIsolation. On a read-only mount the kernel answers a write
// with EROFS before Landlock is asked, so what measures Landlock's own
// refusals (the observer, the pruner) runs with MeasureWithout off
// (Prefix, MeasureArgs).
//
//	status, err := enforcer.Run(ctx, enforcer.Options{Policy: p, Command: []string{"cat", "/etc/hostname"}})
//
// Exec (lockstep run --exec) applies the same restriction to the calling
// thread and executes the command in place: no child, so nothing is left
// beside the command to kill what it leaves running, and a policy with a
// timeout or a cgroup cap is refused.
//
// # Kernel facts
//
// landlock.ABITable holds, per Landlock ABI version, the filesystem and
// network rights and the scopes it handles; landlock.Rights which sections
// grant which rights. CheckEnforceable and Compile are pure functions of a
// policy and a table row, tested for every row without a kernel.
//
// # Environment
//
//   - LOCKSTEP_ROLE: "enforcer-child" selects ChildMain in a re-executed
//     binary (set by Run, removed before the command runs); "enforcer-init"
//     InitMain, the PID namespace's init where there is no /bin/sh;
//     "cgroup-reaper" ReaperMain. The package's
//     init does the dispatch, so any binary that imports enforcer (a test
//     binary too) can be Options.Self. Set by anyone else (no pipes at fds
//     3 and 4), the child says so on stderr and exits 2.
//
// # Limitations
//
// RLIMIT_NPROC does not bind uid 0, so a process cap for root needs a cgroup:
// cgroup v2 at /sys/fs/cgroup when it is writable with the pids and memory
// controllers available, else the cgroup v1 pids and memory hierarchies under
// /sys/fs/cgroup; the status line says which (cgroup=v2, v1 or none:<why>).
// See docs/run.md.
package enforcer
