package prune

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/lockstep-sandbox/lockstep/internal/fulldisk"
	"github.com/lockstep-sandbox/lockstep/record"
)

// guestResult is a prune's result made of a real pair from
// testdata/guest-7.2.13, its .cfg given extra text so that a second write
// differs from the first.
func guestResult(t *testing.T, stem, extra string) *Result {
	t.Helper()
	cfg, err := os.ReadFile(filepath.Join("testdata/guest-7.2.13", stem+record.ConfigSuffix))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := record.ReadExercise(filepath.Join("testdata/guest-7.2.13", stem+record.ExerciseSuffix))
	if err != nil {
		t.Fatal(err)
	}
	cfg = append(cfg, extra...)
	rec.CfgSHA256 = record.SHA256Hex(cfg)
	return &Result{Key: rec.Key, Exercise: rec.Exercise, Cfg: cfg, Record: rec}
}

// tmpFiles lists the writer's temporaries (".<name>.tmp") left in dir.
func tmpFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, ".*.tmp"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestWriteDiskFull writes a prune's outputs onto a real tmpfs that runs
// out of space. Full before the .cfg: the error names the file and ENOSPC,
// the earlier pair stays as it was, no temporary is left. Room for the .cfg
// only: the new .cfg lands beside the earlier record, which no longer
// vouches for it (what observe and orchestrate refuse), and no temporary is
// left.
func TestWriteDiskFull(t *testing.T) {
	const stem = "generic_shell-reference"
	for _, tc := range []struct {
		Name    string
		Leave   int64 // bytes left free before the second write
		Failing string
	}{
		{"FullBeforeTheCfg", 0, stem + record.ConfigSuffix},
		{"RoomForTheCfgOnly", int64(os.Getpagesize()), stem + record.ExerciseSuffix},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			dir := fulldisk.Mount(t, 1<<20)
			first := guestResult(t, stem, "")
			if _, err := first.Write(dir); err != nil {
				t.Fatalf("the first write, with room: %v", err)
			}
			fulldisk.Fill(t, dir, "filler", tc.Leave)
			second := guestResult(t, stem, "# pruned again\n")
			paths, err := second.Write(dir)
			if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), filepath.Join(dir, tc.Failing)) {
				t.Fatalf("Write on a full disk = %v, %v; want ENOSPC naming %s", paths, err, tc.Failing)
			}
			if left := tmpFiles(t, dir); len(left) > 0 {
				t.Errorf("temporaries left on the full disk: %v", left)
			}
			cfg, err := os.ReadFile(filepath.Join(dir, stem+record.ConfigSuffix))
			if err != nil {
				t.Fatal(err)
			}
			rec, err := record.ReadExercise(filepath.Join(dir, stem+record.ExerciseSuffix))
			if err != nil {
				t.Fatalf("the earlier record: %v", err)
			}
			if rec.CfgSHA256 != first.Record.CfgSHA256 {
				t.Errorf("the record on disk is not the earlier one")
			}
			switch tc.Name {
			case "FullBeforeTheCfg":
				if string(cfg) != string(first.Cfg) || rec.Vouches(cfg) != nil {
					t.Errorf("the earlier pair changed: the .cfg is %d bytes, the record vouches: %v", len(cfg), rec.Vouches(cfg))
				}
			case "RoomForTheCfgOnly":
				if string(cfg) != string(second.Cfg) {
					t.Errorf("the .cfg on disk is not the new one (%d bytes)", len(cfg))
				}
				if err := rec.Vouches(cfg); err == nil {
					t.Error("the earlier record vouches for the new .cfg; want the mismatch observe and orchestrate refuse")
				}
			}
		})
	}
}
