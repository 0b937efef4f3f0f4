package harness

// GuestInfo is the provenance of a guest that ran one side (repro) or one
// cell (verify).
type GuestInfo struct {
	Pin             string `json:"pin,omitempty"`
	BzImage         string `json:"bzimage"`
	BzImageSHA256   string `json:"bzimage_sha256"`
	InitramfsSHA256 string `json:"initramfs_sha256"`
	QEMUVersion     string `json:"qemu_version"`
	Accel           string `json:"accel"`
	// CPU is QEMU's CPU model (-cpu) the guest ran on: the KVM probe's
	// choice, --cpu or $LOCKSTEP_CPU under KVM, max under TCG; "" in
	// records made before it was kept.
	CPU     string  `json:"cpu,omitempty"`
	VCPUs   int     `json:"vcpus"`
	MemMB   int     `json:"mem_mb"`
	Timings Timings `json:"timings"`
}

// NewGuestInfo is the provenance of the guest run that booted bzImage (built
// from pin; "" for a file).
func NewGuestInfo(pin, bzImage string, run *Result) *GuestInfo {
	return &GuestInfo{Pin: pin, BzImage: bzImage, BzImageSHA256: run.KernelSHA256, InitramfsSHA256: run.InitramfsSHA256,
		QEMUVersion: run.QEMUVersion, Accel: run.Accel, CPU: run.CPU, VCPUs: run.CPUs, MemMB: run.MemMB, Timings: run.Timings}
}
