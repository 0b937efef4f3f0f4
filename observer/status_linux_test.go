package observer

import (
	"os"
	"path/filepath"
	"testing"
)

func TestExercisesStatus(t *testing.T) {
	tests := []struct {
		Name         string
		Failed, Lost bool
		Want         int
	}{
		{"AllVerified", false, false, StatusVerified},
		{"RecordsLost", false, true, StatusIndeterminate},
		{"Failed", true, false, StatusFailed},
		{"FailedAndLost", true, true, StatusFailed},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			if got := exercisesStatus(tt.Failed, tt.Lost); got != tt.Want {
				t.Errorf("exercisesStatus(%v, %v) = %d, want %d", tt.Failed, tt.Lost, got, tt.Want)
			}
		})
	}
}

func TestClearStale(t *testing.T) {
	dir := t.TempDir()
	keep := []string{"fixture_udp-fixture.cfg", "fixture_udp-fixture.json", "other_x.abi10.json"}
	drop := []string{"fixture_udp-fixture.abi10.json", "fixture_udp-fixture.abi10.cfg", "fixture_udp-fixture.abi10.observed.trace.gz"}
	for _, n := range append(append([]string{}, keep...), drop...) {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := clearStale(dir, "fixture"); err != nil {
		t.Fatal(err)
	}
	for _, n := range keep {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			t.Errorf("clearStale removed %s, want it kept", n)
		}
	}
	for _, n := range drop {
		if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
			t.Errorf("clearStale kept %s, want it removed", n)
		}
	}
}
