package cli

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// TestLineDisplay: on a terminal, a progress line replaces the one before
// it (cut to the width), any other line stays, and writes may split lines
// anywhere.
func TestLineDisplay(t *testing.T) {
	var b bytes.Buffer
	d := NewDisplay(&b, "prune", 30)
	for _, chunk := range []string{
		"lockstep prune [0s] run 1\nlockstep pr", "une [1s] run 2 with a very long tail that is cut\n",
		"lockstep prune: warning: kept\n", "lockstep prune [2s] run 3\n", "partial",
	} {
		if _, err := d.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	d.End()
	want := "lockstep prune [0s] run 1" + EraseLine + "lockstep prune [1s] run 2 wit" + EraseLine +
		"lockstep prune: warning: kept\n" + "lockstep prune [2s] run 3" + EraseLine + "partial\n"
	if b.String() != want {
		t.Errorf("display wrote\n%q\nwant\n%q", b.String(), want)
	}
}

// TestLineDisplayConcurrent: a guest's stream and the verb's logger write
// at once; every line arrives whole.
func TestLineDisplayConcurrent(t *testing.T) {
	var b bytes.Buffer
	d := NewDisplay(&b, "prune", 200)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				fmt.Fprintf(d, "kept %d-%d\n", g, i)
			}
		}()
	}
	wg.Wait()
	if n := strings.Count(b.String(), "\n"); n != 400 || !regexp.MustCompile(`^(kept \d-\d+\n)+$`).MatchString(b.String()) {
		t.Errorf("%d lines, or a line torn:\n%s", n, b.String())
	}
}
