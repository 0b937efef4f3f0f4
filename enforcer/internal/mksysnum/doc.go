// Command mksysnum writes enforcer/zsysnum.go, the system call numbers of
// every calling convention the seccomp filter knows, from a table of the
// kernel's syscall tables in the CSV form libseccomp keeps (src/syscalls.csv:
// one row per system call, a column per architecture, "PNR" where the
// architecture has no such call). The kernel's own tables
// (arch/x86/entry/syscalls/syscall_{64,32}.tbl, arch/arm/tools/syscall.tbl,
// scripts/syscall.tbl for arm64) are the source of that file.
//
//	go run ./enforcer/internal/mksysnum syscalls.csv > enforcer/zsysnum.go
package main
