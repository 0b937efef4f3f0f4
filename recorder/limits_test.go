package recorder

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/derive/limits"
)

// generate --limits turns the sessions' samples (their maxima) into
// [limits] with the layer pruner's margins; mem_mb only with
// --memory-pinned, mem_mb=0 with --address-space-unbounded; a session
// recorded without --sample is refused, and so are either without
// --limits and both together.
func TestGenerateLimits(t *testing.T) {
	sampled := func(m limits.Measurement) *SessionRecord {
		s := session(fsUse(1, "read", need("/var/w/in.txt", "read")))
		s.Limits = &m
		return s
	}
	a := limits.Measurement{WallSeconds: 20, CPUSeconds: 2, VMPeakMB: 300, Tasks: 3, HighestFD: 5, OpenFDs: 6, Samples: 200}
	b := limits.Measurement{WallSeconds: 70, CPUSeconds: 1, VMPeakMB: 700, Tasks: 40, HighestFD: 3, OpenFDs: 4, LargestFileMB: 20, Samples: 700}
	rec := writeRecording(t, sampled(a), sampled(b))
	for _, tc := range []struct {
		pinned, unbounded bool
		want              string
	}{
		// timeout 5×70 s → the 600 s rung; cpu 5×2 → 30; nproc 2×40+16 →
		// 128; nofile 256; fsize_mb ⌈2×20⌉₁₆ = 48; mem_mb ⌈2×700⌉₂₅₆ = 1536.
		{false, false, "[limits]\ntimeout=600\ncpu=30\nnproc=128\nnofile=256\nfsize_mb=48\n"},
		{true, false, "[limits]\ntimeout=600\ncpu=30\nmem_mb=1536\nnproc=128\nnofile=256\nfsize_mb=48\n"},
		// A sanitizer's or a JVM's reservation: mem_mb switched off.
		{false, true, "[limits]\ntimeout=600\ncpu=30\nmem_mb=0\nnproc=128\nnofile=256\nfsize_mb=48\n"},
	} {
		g, err := Generate(rec, GenerateOptions{Limits: true, MemoryPinned: tc.pinned, AddressSpaceUnbounded: tc.unbounded})
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := os.ReadFile(filepath.Join(rec, PolicyFile))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(cfg), tc.want) {
			t.Errorf("pinned %v: the policy lacks\n%s\nit is:\n%s", tc.pinned, tc.want, cfg)
		}
		if g.Record.Limits == nil || len(g.Record.Limits.Measurements) != 2 || !strings.Contains(string(cfg), "[limits] from 2 sampled session(s)") {
			t.Errorf("pinned %v: record.json's limits %+v, header:\n%s", tc.pinned, g.Record.Limits, cfg)
		}
	}
	for _, o := range []GenerateOptions{{MemoryPinned: true}, {AddressSpaceUnbounded: true},
		{Limits: true, MemoryPinned: true, AddressSpaceUnbounded: true}} {
		if _, err := Generate(rec, o); err == nil {
			t.Errorf("%+v was accepted", o)
		}
	}
	mixed := writeRecording(t, sampled(a), session())
	if _, err := Generate(mixed, GenerateOptions{Limits: true}); err == nil || !strings.Contains(err.Error(), "without --sample") {
		t.Errorf("limits from a recording with an unsampled session: %v, want a refusal naming --sample", err)
	}
}
