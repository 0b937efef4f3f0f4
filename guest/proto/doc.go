// Package proto is the wire contract between the lockstep host (package
// harness) and the guest's PID 1 (package guest): the job the host hands in,
// the events the guest streams out, the framed results archive, the console
// status line and the fixed paths and names both sides agree on.
//
// It uses the standard library only, so both sides can import it without
// pulling anything into the initramfs that the guest does not need.
//
// # Channels
//
//   - The console (ttyS0) carries the kernel log and, as its last line,
//     "LOCKSTEP-STATUS <n>". [ParseStatus] takes the last match anywhere on a
//     line, strips '\r' and requires a number; no line means indeterminate (3).
//   - The virtio-serial port [EventsPort] carries [Event] values as JSON lines,
//     each with a [Event.Seq] counting from 0 without gaps; the last one has
//     type [EventDone] and a [Done] with counts and the results archive's
//     SHA-256. [EventReader] refuses gaps, anything after done, and a stream
//     that ends without done.
//   - The virtio-serial port [ResultsPort] carries one frame ([WriteFrame],
//     [ReadFrame]): [FrameMagic], a big-endian uint64 length, the SHA-256 of
//     the payload, then the payload (a zstd-compressed tar of [ResultsDir]).
//   - Only when the host asks for it, the virtio-serial port [InputPort]
//     carries input the other way, host to guest: an interactive session's
//     keystrokes and window sizes ([WriteInputData], [WriteInputWindow],
//     [ReadInput]: a kind byte, a big-endian uint16 length, the payload).
//     PID 1 leaves it alone; the job that wants it opens it.
//
// # Typed jobs
//
// A job's command may be the guest's own lockstep binary ([GuestBinary])
// playing a registered role ([EnvRole] in its environment): a workload's
// guest side. Its options travel in the job as [Job.Options]; PID 1 writes
// them to [OptionsFile] before the command starts, and the role reads them
// with [ReadOptions]. No side spells the other's command-line flags.
//
// # Kernel command line
//
// The host passes "lockstep.job=<id>" ([CmdlineJob]); the guest refuses a
// job.json whose ID differs, so a stale initramfs never runs. Tests may pass
// "lockstep.hook=<name>" ([CmdlineHook]) to make PID 1 misbehave on purpose
// (see the Hook constants).
package proto
