// Package auditnl asks the kernel's audit subsystem over netlink what
// go-libaudit's own calls ask with too short a wait: the status, whose
// reply the kernel sends from a thread of its own.
package auditnl
