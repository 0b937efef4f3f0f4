package featuretest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// recorder is a TB that remembers how the helper ended the test.
type recorder struct{ skipped, failed string }

func (r *recorder) Helper()                      {}
func (r *recorder) Skipf(f string, args ...any)  { r.skipped = fmt.Sprintf(f, args...) }
func (r *recorder) Fatalf(f string, args ...any) { r.failed = fmt.Sprintf(f, args...) }

func (r *recorder) outcome() string {
	switch {
	case r.failed != "":
		return "fail"
	case r.skipped != "":
		return "skip"
	}
	return "run"
}

var errMissing = errors.New("operation not supported")

// The helper skips below a feature's first version and fails at or above it.
func TestDecisions(t *testing.T) {
	noLandlock := errors.New("landlock_create_ruleset: operation not supported")
	cases := []struct {
		name string
		k    Kernel
		f    Feature
		err  error // nil: Require, else SkipIfNotSupported with it
		want string
	}{
		{"below the ABI: skip", Kernel{ABI: 6, Release: "6.12.1"}, LandlockUDP, nil, "skip"},
		{"at the ABI: run", Kernel{ABI: 10, Release: "7.2.13"}, LandlockUDP, nil, "run"},
		{"above the ABI: run", Kernel{ABI: 11, Release: "7.3"}, LandlockScope, nil, "run"},
		{"below the ABI, tried: skip", Kernel{ABI: 3, Release: "6.2"}, LandlockNetwork, errMissing, "skip"},
		{"at the ABI, tried and missing: fail", Kernel{ABI: 4, Release: "6.7"}, LandlockNetwork, errMissing, "fail"},
		{"above the ABI, tried and missing: fail", Kernel{ABI: 7, Release: "6.15"}, LandlockNetwork, errMissing, "fail"},
		{"above the ABI, tried and working: run", Kernel{ABI: 7, Release: "6.15"}, LandlockNetwork, nil, "run"},
		{"no Landlock before 5.13: skip", Kernel{ABIErr: noLandlock, Release: "5.10.0-30-amd64"}, Landlock, nil, "skip"},
		{"no Landlock on 5.13 or later: fail", Kernel{ABIErr: noLandlock, Release: "6.1.0-57-amd64"}, Landlock, nil, "fail"},
		{"no Landlock on 5.13 or later, a later ABI: fail", Kernel{ABIErr: noLandlock, Release: "5.13"}, LandlockUDP, nil, "fail"},
		{"below the release: skip", Kernel{Release: "6.1.0"}, MemfdNoexec, errMissing, "skip"},
		{"at the release, missing: fail", Kernel{Release: "6.3.0"}, MemfdNoexec, errMissing, "fail"},
		{"above the release, missing: fail", Kernel{Release: "6.18.44-fc-v1272"}, MemfdNoexec, errMissing, "fail"},
		{"above the release, present: run", Kernel{Release: "6.18.44-fc-v1272"}, MemfdNoexec, nil, "run"},
	}
	for _, c := range cases {
		r := &recorder{}
		if c.err == nil {
			c.k.Require(r, c.f)
		} else {
			c.k.SkipIfNotSupported(r, c.f, c.err)
		}
		if got := r.outcome(); got != c.want {
			t.Errorf("%s: %s (skip %q, fail %q), want %s", c.name, got, r.skipped, r.failed, c.want)
		}
	}
}

func TestAtLeast(t *testing.T) {
	for _, c := range []struct {
		rel, min string
		want     bool
	}{
		{"6.18.44-fc-v1272", "6.3", true},
		{"6.3", "6.3", true},
		{"6.2.16", "6.3", false},
		{"5.13", "5.13", true},
		{"5.4.0-150-generic", "5.13", false},
		{"10.0", "9.9", true},
		{"", "5.13", false},
		{"garbage", "5.13", false},
	} {
		if got := AtLeast(c.rel, c.min); got != c.want {
			t.Errorf("AtLeast(%q, %q) = %v, want %v", c.rel, c.min, got, c.want)
		}
	}
}

// failEnv runs TestFailsOnThisKernel's body in a child test binary.
const failEnv = "LOCKSTEP_FEATURETEST_CHILD"

// A real test on this machine's kernel fails, not skips, when a feature the
// kernel offers by its version is reported missing: the child test binary
// exits 1 with the helper's message. Its feature is one this kernel offers
// (Landlock itself, or vm.memfd_noexec on 6.3 or later).
func TestFailsOnThisKernel(t *testing.T) {
	if os.Getenv(failEnv) != "" {
		f := Landlock
		if Host().ABIErr != nil {
			f = MemfdNoexec
		}
		SkipIfNotSupported(t, f, errMissing)
		return
	}
	k := Host()
	if has, _ := k.Has(Landlock); !has {
		if has, _ := k.Has(MemfdNoexec); !has {
			t.Skipf("this kernel (%s) offers neither Landlock nor vm.memfd_noexec by its version", k.Release)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestFailsOnThisKernel$", "-test.v")
	cmd.Env = append(os.Environ(), failEnv+"=1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "--- FAIL: TestFailsOnThisKernel") || !strings.Contains(string(out), "should offer it") {
		t.Fatalf("the child test = %v, want a failure saying the kernel should offer the feature:\n%s", err, out)
	}
}
