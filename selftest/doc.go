// Package selftest is `lockstep selftest`'s two ends: [Host] boots a kernel
// in a throwaway guest whose job is the role [GuestRole], and reads back the
// report it wrote; [Guest] runs the kernel proof (observer/proof) on the
// running kernel and writes the report and every record it read. See
// docs/selftest.md.
package selftest
