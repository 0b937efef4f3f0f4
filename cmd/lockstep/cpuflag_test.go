package main

import (
	"flag"
	"io"
	"os"
	"testing"

	"github.com/lockstep-sandbox/lockstep/harness"
)

// TestCPUFlagOnEveryGuestVerb: every verb that takes --accel takes --cpu
// too; on all but boot (which hands it to its guest) a model given becomes
// $LOCKSTEP_CPU, which the harness reads for each guest, and a model with
// a space is refused.
func TestCPUFlagOnEveryGuestVerb(t *testing.T) {
	n := 0
	for name, v := range verbs {
		fs := flag.NewFlagSet(name, flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		v.Flags(fs)
		if fs.Lookup("accel") == nil {
			continue
		}
		n++
		if fs.Lookup("cpu") == nil {
			t.Errorf("%s takes --accel but not --cpu", name)
			continue
		}
		if name == "boot" {
			continue
		}
		t.Setenv(harness.CPUEnv, "")
		if err := fs.Parse([]string{"--cpu", "EPYC,-xsave"}); err != nil {
			t.Errorf("%s --cpu EPYC,-xsave: %v", name, err)
		}
		if got := os.Getenv(harness.CPUEnv); got != "EPYC,-xsave" {
			t.Errorf("%s --cpu EPYC,-xsave: $%s = %q, want the model", name, harness.CPUEnv, got)
		}
		fs = flag.NewFlagSet(name, flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		v.Flags(fs)
		if err := fs.Parse([]string{"--cpu", "host -xsave"}); err == nil {
			t.Errorf("%s --cpu 'host -xsave': accepted a model with a space", name)
		}
	}
	if n < 7 {
		t.Errorf("%d verbs take --accel, want boot, selftest, observe, prune, verify, repro and record at least", n)
	}
}
