package harness

// DefaultTCGTimeFactor is the time factor of a guest under TCG (TimeFactor):
// measured, r's reference exercise ran 10.6 times slower (medians, 62.0 s
// against 5.9 s) and python's 8.6 times in a TCG guest on the pinned kernel
// than on this machine's kernel, each on one CPU (docs/observe.md, "Time
// limits under TCG"). The policy's limits keep their own margin (the prune
// sets timeout at 5 times the slowest run or more), so 10 leaves about 4.
const DefaultTCGTimeFactor = 10

// TimeFactor is how much longer than the policy's limits a guest's
// exercise runs may take: under TCG, tcg (DefaultTCGTimeFactor when 0),
// as an emulated CPU is several times slower than the machine the limits
// were measured on (TCG's speed is no property of the kernel); under KVM,
// or on the host (accel ""), 1.
func TimeFactor(accel string, tcg int) int {
	if accel != AccelTCG {
		return 1
	}
	if tcg <= 0 {
		return DefaultTCGTimeFactor
	}
	return tcg
}
