package observer

import "testing"

// TestLanesFor: the fixture's Python (about 10 MiB) fits twice in any guest;
// a JVM of 350 MiB in a 1 GiB guest with 700 MiB free runs alone, with
// 1.7 GiB free beside one other; an unknown peak runs alone.
func TestLanesFor(t *testing.T) {
	for _, c := range []struct {
		n          int
		avail, rss int64
		want       int
	}{
		{2, 800, 10 << 10, 2},
		{2, 700, 350 << 10, 1},
		{2, 1740, 350 << 10, 2},
		{4, 1740, 350 << 10, 2},
		{2, 4000, 0, 1},
		{2, 0, 10 << 10, 1},
	} {
		if got := lanesFor(c.n, c.avail, c.rss); got != c.want {
			t.Errorf("lanesFor(%d, %d MiB, %d KiB) = %d, want %d", c.n, c.avail, c.rss, got, c.want)
		}
	}
}
