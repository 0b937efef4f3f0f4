package verify

import "testing"

// TestWorseStatus: a failure (1) wins over an indeterminate or unset-up
// status; otherwise the higher status.
func TestWorseStatus(t *testing.T) {
	for _, tc := range [][3]int{{0, 0, 0}, {0, 3, 3}, {3, 1, 1}, {70, 1, 1}, {3, 70, 70}, {1, 0, 1}} {
		if got := WorseStatus(tc[0], tc[1]); got != tc[2] {
			t.Errorf("WorseStatus(%d, %d) = %d, want %d", tc[0], tc[1], got, tc[2])
		}
	}
}
