// Package guest is the inside of a lockstep guest: PID 1 ([Main]), the
// initramfs builder ([Initramfs]) and the results archive ([PackResults],
// [UnpackResults]).
//
// # PID 1
//
// The initramfs carries exactly the lockstep binary as /init, the job as
// /job.json and, when the root lacks it, strace with its libraries under
// /extra. [Main] then:
//
//  1. mounts devtmpfs, proc, sysfs, devpts, /dev/shm, securityfs, cgroup v2
//     on /sys/fs/cgroup when the kernel has it (the enforcer's process cap
//     for uid 0), makes the /dev/fd and /dev/std* links and /dev/ptmx as
//     the character device a host has (a pruned policy names it);
//  2. reads the kernel command line and the job, refusing a job whose ID is
//     not the command line's lockstep.job= (a stale initramfs);
//  3. finds the virtio-serial ports lockstep.events and lockstep.results in
//     /sys/class/virtio-ports (there is no udev) and sends "hello";
//  4. brings loopback up (binding 127.0.0.1 fails otherwise);
//  5. mounts the 9p root read-only (cache=loose, msize=512000), or the
//     root image's block device (waiting for it to appear), puts a tmpfs
//     overlayfs upper on top, moves /dev, /proc and /sys in, mounts fresh
//     tmpfs on /run, /tmp and /var/tmp (the exercises' working directory
//     must not show the host's), copies itself to /run/lockstep/lockstep,
//     mounts the shares and switches root (MS_MOVE onto /, chroot);
//  6. runs the command with LOCKSTEP_GUEST=1, streaming its stdout and
//     stderr as events; when it exits every other process is killed;
//  7. packs /run/lockstep/results (tar + zstd) into one frame on the
//     results port and waits for the host's byte back saying it read all
//     of it, sends "done" with the counts and the frame's SHA-256 and waits
//     for the host's byte back on the events port the same way (a reboot
//     ends QEMU, which drops what a port still holds for a slow host),
//     prints "LOCKSTEP-STATUS <n>" on the console, waits for the UART to
//     drain, syncs and reboots (reboot=t: a triple fault; QEMU runs with
//     -no-reboot and exits).
//
// A failure before the command runs is status 70; the reason goes to the
// console as "LOCKSTEP-ERROR <reason>" and to the event stream. Nothing the
// command writes reaches the host's files: the 9p export and the image disk
// are read-only and writes land in the guest's tmpfs.
//
// # Initramfs
//
// [Initramfs] uses mkuimage's files option (no Go is compiled per boot):
// the file is a small uncompressed cpio with job.json followed by the
// compressed base (init, /dev/console, extras), which is cached by content
// hash, so a warm build costs a hash of the binary and a copy.
package guest
