package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/internal/lockstepbin"
)

// TestStrictFlags holds the flags that guard something to an explicit,
// single value, through the real binary: an empty --expect-hash switched
// the hash check off, a repeated one let the last win, --base-dir was a
// glob, and an empty --pin or --kernel took the default pin.
func TestStrictFlags(t *testing.T) {
	bin := lockstepbin.Build(t)
	d := t.TempDir()
	write := func(name, s string) string {
		t.Helper()
		p := filepath.Join(d, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfg := write("p.cfg", truePolicy)
	secret := write("secret", "secret\n")
	write("bases*/BaseA.cfg", truePolicy)
	write("bases-x/BaseB.cfg", "[read]\n"+secret+"\n")
	long := write("long.cfg", truePolicy+"[limits]\ntimeout=18446744074\n")
	_, out, _ := runBin(t, bin, nil, "policy", "hash", cfg)
	hash, _, _ := strings.Cut(out, " ")
	wrong := "sha256:" + strings.Repeat("0", 64)
	// No test here may build, fetch or boot a kernel, even if a refusal broke.
	env := []string{"XDG_CACHE_HOME=" + filepath.Join(d, "cache")}
	pins := "7.2.13"

	for _, tc := range []struct {
		Name     string
		Args     []string
		Want     int
		Err      string
		NotInErr string
	}{
		{"expect-hash empty", []string{"run", "-q", "--config", cfg, "--expect-hash", "", "--", "true"}, cli.ExitUsage, "want the sha256:<hex>", ""},
		{"expect-hash twice, right one last", []string{"run", "-q", "--config", cfg, "--expect-hash", wrong, "--expect-hash", hash, "--", "true"}, cli.ExitUsage, "given twice", ""},
		{"expect-hash twice alike", []string{"run", "-q", "--config", cfg, "--expect-hash", hash, "--expect-hash", hash, "--", "true"}, 0, "", "given twice"},
		{"base-dir empty", []string{"run", "-q", "--base-dir", "", "--config", cfg, "--", "true"}, cli.ExitUsage, "want the directory holding the Base*.cfg files", ""},
		{"base-dir twice", []string{"run", "-q", "--base-dir", filepath.Join(d, "bases*"), "--base-dir", filepath.Join(d, "bases-x"), "--", "true"}, cli.ExitUsage, "given twice", ""},
		// Only bases*/BaseA.cfg: the secret of bases-x/BaseB.cfg stays refused.
		{"base-dir literal", []string{"run", "-q", "--base-dir", filepath.Join(d, "bases*"), "--", "cat", secret}, 1, "Permission denied", ""},
		{"base-dir missing", []string{"run", "-q", "--base-dir", filepath.Join(d, "nosuch"), "--", "true"}, cli.ExitRefused, "nosuch: does not exist", "holds no Base"},
		{"timeout past a duration", []string{"run", "-q", "--config", long, "--", "sleep", "1"}, cli.ExitRefused, "more than 1000000000 seconds", ""},
		{"kernel key empty pin", []string{"kernel", "key", "--pin", ""}, cli.ExitUsage, pins, ""},
		{"kernel build empty pin", []string{"kernel", "build", "--pin", ""}, cli.ExitUsage, pins, ""},
		{"kernel path empty pin", []string{"kernel", "path", "--pin", ""}, cli.ExitUsage, pins, ""},
		{"kernel verify empty pin", []string{"kernel", "verify", "--pin", ""}, cli.ExitUsage, pins, ""},
		{"kernel fragment empty pin", []string{"kernel", "fragment", "--pin", ""}, cli.ExitUsage, pins, ""},
		{"kernel key two pins", []string{"kernel", "key", "--pin", "7.2.13", "--pin", "6.12.117"}, cli.ExitUsage, "given twice", ""},
		{"boot empty kernel", []string{"boot", "--kernel", "", "--", "true"}, cli.ExitUsage, pins, ""},
		{"observe empty kernel", []string{"observe", "--kernel", ""}, cli.ExitUsage, pins, ""},
		{"probe empty kernel", []string{"probe", "--boot", "--kernel", ""}, cli.ExitUsage, pins, ""},
		{"prune empty kernel", []string{"prune", "--kernel", ""}, cli.ExitUsage, pins, ""},
		{"selftest empty kernel", []string{"selftest", "--kernel", ""}, cli.ExitUsage, pins, ""},
		{"repro empty kernel", []string{"repro", "--kernel", "host", "--kernel", "", "--config", cfg, "--", "true"}, cli.ExitUsage, pins, ""},
		{"verify empty kernel", []string{"verify", "--kernel", ""}, cli.ExitUsage, pins, ""},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			code, _, errs := runBin(t, bin, env, tc.Args...)
			if code != tc.Want || !strings.Contains(errs, tc.Err) || tc.NotInErr != "" && strings.Contains(errs, tc.NotInErr) {
				t.Errorf("lockstep %q = %d\nstderr %q\nwant %d, stderr with %q and without %q", tc.Args, code, errs, tc.Want, tc.Err, tc.NotInErr)
			}
		})
	}
}
