package main

import "github.com/lockstep-sandbox/lockstep/guest"

// When the kernel starts lockstep as PID 1 from the initramfs, it is the
// guest's init.
func init() { guestMain = guest.Main }
