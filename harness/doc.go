// Package harness boots throwaway QEMU guests that run one command each and
// brings back the command's output, status and results, never reporting a
// pass when the guest did not report.
//
// # Example
//
//	res, err := harness.Run(ctx, harness.Options{
//		Kernel:  bzImage, // from kernel.Path
//		Command: []string{"/bin/sh", "-c", "uname -r > /run/lockstep/results/release"},
//		Stdout:  os.Stdout, Stderr: os.Stderr,
//		ResultsDir: "out",
//	})
//	// res.Status is the command's status, 3 (indeterminate) or 70 (guest setup).
//
// # What a boot looks like
//
// The QEMU command line comes from a typed [QEMUConfig] (tested as data):
// microvm with virtio-mmio and qboot by default (no SeaBIOS, no PCI, no
// ACPI), q35 with virtio-pci as the fallback; always -no-reboot, -nodefaults,
// no NIC, the serial console to a file, QMP, 9p exports and two
// virtio-serial ports on unix sockets inside a private temp dir per guest
// (a third, host to guest, when Options.Input is set).
// The kernel command line (docs/harness.md) carries reboot=t, so the
// guest's final reboot is a triple fault that makes QEMU exit.
//
// # Channels and the three outcomes
//
// The console is parsed for the last "LOCKSTEP-STATUS <n>"; the events port
// carries sequenced JSON lines ending in "done"; the results port one
// checksummed frame. A missing status line, a sequence gap, a missing done,
// counts or checksums that disagree, or a passed deadline make the run
// indeterminate (status 3, [ErrIndeterminate]); a guest that could not set
// itself up reports status 70 ([ErrGuestSetup]) with its reason.
//
// # Accelerator
//
// "auto" uses KVM only after a probe boot under KVM reported in time; the
// verdict is cached in $XDG_CACHE_HOME/lockstep/accel.json per (host kernel
// release, QEMU version), see [CachedAccel] and [ProbeAccel]. A host where
// /dev/kvm exists but guests hang or QEMU aborts is "present but unusable":
// the run falls back to TCG and says so once as a warning and in run.json.
// Asking for kvm there fails fast with [ErrKVMUnusable]. Default deadlines
// scale with the accelerator (×10 under TCG, as syzkaller does).
//
// # Deadlines and cleanup
//
// Each phase has a deadline: boot (QEMU start to the guest's hello), job
// (to the command's exit) and shutdown (to QEMU's exit). When one passes,
// the harness saves forensics.txt (query-status, "info registers -a" via
// human-monitor-command, the console's last 100 lines), asks QEMU to quit
// and kills its process group. QEMU runs in its own process group with
// PR_SET_PDEATHSIG, and every path out of [Run] — including a cancelled
// context from SIGINT — kills it, waits for it and removes the temp dir.
// Every QMP call has a deadline (a QMP call has none of its own), and QMP
// answers are read on the caller's goroutine (qmpConn).
//
// # Parallel guests
//
// [Pool] runs guests concurrently bounded by host CPUs and memory; each has
// its own temp dir, sockets and process, so nothing collides.
//
// # Environment
//
//   - LOCKSTEP_QEMU: the QEMU binary (default qemu-system-x86_64).
//   - LOCKSTEP_INITRAMFS_COMPRESSION: gzip, zstd or none for the cached
//     initramfs base (default none: measured cheaper to boot under TCG).
//   - XDG_CACHE_HOME: where the accel verdict, initramfs bases and
//     forensics of runs without a results directory go.
package harness
