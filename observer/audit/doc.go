// Package audit parses Linux audit records, above all Landlock's
// (LANDLOCK_ACCESS 1423 and LANDLOCK_DOMAIN 1424) and the SYSCALL (1300)
// record that shares their serial, and on Linux collects them as the
// registered audit daemon.
//
// # Forms
//
// A record reaches user space in one of four forms, all parsed here into the
// same [Record]:
//
//	netlink body   audit(1791373582.204:4): domain=1bf4c9339 blockers=fs.read_file path="/etc/hostname" …
//	/dev/kmsg      5,401,8100000,-;audit: type=1423 audit(…): …
//	dmesg          [    1.381916] audit: type=1423 audit(…): …
//	auditd's log   type=LANDLOCK_ACCESS msg=audit(…): …   (or type=UNKNOWN[1423])
//
// [ParseNetlink] takes the type from the netlink header; [ParseLine] detects
// the other three. Values are kept as the kernel wrote them; the typed views
// ([Record.Access], [Record.Domain], [Record.Syscall]) decode them: the
// untrusted strings (path, dev, name, exe, comm, ocomm, proctitle, cwd) are
// upper-case hex, unquoted, whenever they hold a byte outside 0x21–0x7e or a
// quote, so a space or d_path's " (deleted)" suffix turns the whole value into
// hex. Numeric fields that look like hex are never decoded.
//
// # Collector
//
// On Linux, [Start] registers the process as the audit daemon (unicast;
// waiting up to [Options].SlotWait while another collector holds the slot),
// then enables audit, sets the backlog limit (8192) and the rate limit (0,
// unlimited), and reads records in a goroutine; [Collector.Close] puts the
// settings back and unregisters. A [Run] accepts only Landlock domains whose
// allocated record names a pid of the run's process tree, waits for each
// domain's "status=deallocated denials=N" record as a barrier and loss check,
// and compares the kernel's lost counter before and after: a loss or a
// missing barrier makes the run indeterminate.
//
// Facts: Linux 7.2 security/landlock/audit.c, kernel/audit.c; the kernel's
// admin guide, Documentation/admin-guide/LSM/landlock.rst.
package audit
