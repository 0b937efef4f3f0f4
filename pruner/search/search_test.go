package search

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/derive/placement"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

// fakeExercise needs a set of (path, section) grants; like a real build it
// stops at its first refusal, so an observed run reveals one need (or, with
// intent, two) at a time. Unneeded grants make no difference.
type fakeExercise struct {
	needs []Item
	// perRound is how many missing needs one observed run reveals.
	perRound int
	// observerBreaks makes every observed run fail (a tracer problem).
	observerBreaks bool
	// hidden makes the run fail without any refusal to attribute.
	hidden bool
	// stubborn makes a refusal that its grant does not lift.
	stubborn bool
	runs     int
}

func (f *fakeExercise) run(_ context.Context, p *policy.Policy, observed bool) (Outcome, error) {
	f.runs++
	if f.hidden {
		return Outcome{}, nil
	}
	var missing []Item
	for _, n := range f.needs {
		if !n.coveredBy(p) {
			missing = append(missing, n)
		}
	}
	if f.stubborn && len(Items(p)) > 0 {
		missing = append(missing, Items(p)[0])
	}
	if observed && f.observerBreaks {
		return Outcome{}, nil
	}
	if len(missing) == 0 {
		return Outcome{Matched: true}, nil
	}
	if !observed {
		return Outcome{}, nil
	}
	k := f.perRound
	if k == 0 {
		k = 1
	}
	if k > len(missing) {
		k = len(missing)
	}
	return Outcome{Grants: Build(missing[:k], nil)}, nil
}

func (f *fakeExercise) try(ctx context.Context, kept []Item) (bool, error) {
	o, err := f.run(ctx, Build(kept, nil), false)
	return o.Matched, err
}

func needs(n int) []Item {
	var out []Item
	for i := 0; i < n; i++ {
		out = append(out, Item{Section: policy.Read, Path: fmt.Sprintf("/usr/lib/n%02d", i)})
	}
	return out
}

func TestGrowConverges(t *testing.T) {
	for _, tc := range []struct {
		Name             string
		N, PerRound      int
		Rounds, WantRuns int
	}{
		{"one need per run", 5, 1, 0, 6},
		{"two needs per run (open intent)", 5, 2, 0, 4},
		{"nothing needed", 0, 1, 0, 1},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			f := &fakeExercise{needs: needs(tc.N), perRound: tc.PerRound}
			res, err := Grow(t.Context(), GrowOptions{Run: f.run, Rounds: tc.Rounds})
			if err != nil {
				t.Fatal(err)
			}
			if got := len(Items(res.Policy)); got != tc.N || f.runs != tc.WantRuns || res.Rounds != tc.WantRuns {
				t.Errorf("Grow: %d items in %d runs (%d rounds), want %d in %d", got, f.runs, res.Rounds, tc.N, tc.WantRuns)
			}
			if len(res.Failed) != tc.WantRuns-1 {
				t.Errorf("Grow: %d failed policies, want %d", len(res.Failed), tc.WantRuns-1)
			}
		})
	}
}

func TestGrowAborts(t *testing.T) {
	for _, tc := range []struct {
		Name   string
		F      *fakeExercise
		Rounds int
		Want   string
	}{
		{"no attributable denial", &fakeExercise{hidden: true}, 0, "without an attributable denial"},
		{"budget", &fakeExercise{needs: needs(10)}, 3, "did not converge within the grow budget of 3"},
		{"refusal survived its grant", &fakeExercise{needs: needs(2), stubborn: true}, 0, "survived its own grant"},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			res, err := Grow(t.Context(), GrowOptions{Run: tc.F.run, Rounds: tc.Rounds})
			var ae *AbortError
			if !errors.As(err, &ae) || !errors.Is(err, ErrAbort) || !strings.Contains(ae.Reason, tc.Want) {
				t.Fatalf("Grow = %v, %v; want an abort containing %q", res, err, tc.Want)
			}
			if res.Policy != nil {
				t.Errorf("an aborted Grow returned a policy: %v", res.Policy)
			}
		})
	}
}

// An observed run that fails for the observer's sake only: the unobserved
// rerun matches, so the policy stands with nothing granted.
func TestGrowObserverCausedFailure(t *testing.T) {
	f := &fakeExercise{observerBreaks: true}
	res, err := Grow(t.Context(), GrowOptions{Run: f.run})
	if err != nil || res.Reruns != 1 || len(Items(res.Policy)) != 0 {
		t.Fatalf("Grow = %+v, %v; want the empty policy after one rerun", res, err)
	}
}

// referenceMinimise is Phobos's algorithm without lockstep's skipping, to
// compare run counts against.
func referenceMinimise(ctx context.Context, items []Item, try TryFunc) (kept []Item, trials, runs int) {
	k, st, err := Minimise(ctx, items, nil, try)
	if err != nil {
		panic(err)
	}
	return k, st.Trials, st.Runs
}

func TestMinimise(t *testing.T) {
	for _, tc := range []struct {
		Name          string
		Needed, Extra int
	}{
		{"all needed", 8, 0},
		{"none needed", 0, 8},
		{"half needed", 6, 6},
		{"one needed among many", 1, 15},
		{"odd sizes", 5, 8},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			need := needs(tc.Needed + tc.Extra)
			f := &fakeExercise{needs: need[:tc.Needed]}
			// interleave needed and extra so halves mix.
			items := append([]Item(nil), need...)
			kept, st, err := Minimise(t.Context(), items, nil, f.try)
			if err != nil {
				t.Fatal(err)
			}
			n := len(items)
			if len(kept) != tc.Needed || st.Kept != tc.Needed || len(st.Removed) != tc.Extra {
				t.Errorf("Minimise kept %d (%v), want %d", len(kept), kept, tc.Needed)
			}
			for i := range kept {
				if kept[i] != need[i] {
					t.Errorf("kept[%d] = %v, want %v (order kept)", i, kept[i], need[i])
				}
			}
			if n > 0 && (st.Trials > 2*n-1 || st.Runs > 4*n-2) {
				t.Errorf("Minimise took %d trials, %d runs for %d items; the reference bound is %d, %d", st.Trials, st.Runs, n, 2*n-1, 4*n-2)
			}
			if st.Runs != f.runs {
				t.Errorf("Minimise counted %d runs, the exercise ran %d times", st.Runs, f.runs)
			}
			// 1-minimal: dropping any kept item fails.
			for i := range kept {
				rest := append(append([]Item(nil), kept[:i]...), kept[i+1:]...)
				if ok, _ := f.try(t.Context(), rest); ok {
					t.Errorf("dropping %v still passes: not 1-minimal", kept[i])
				}
			}
			t.Logf("n=%d: %d trials, %d runs, %d skipped (bound %d trials, %d runs)", n, st.Trials, st.Runs, st.Skipped, 2*n-1, 4*n-2)
		})
	}
}

// With the grow history as known failures, Minimise runs less than the
// reference algorithm: the first trial (remove everything) is the policy the
// first grow round failed with.
func TestMinimiseWithGrowHistory(t *testing.T) {
	for _, tc := range []struct {
		Name          string
		Needed, Extra int
	}{
		{"all needed", 12, 0},
		{"half needed", 8, 8},
		{"one extra", 15, 1},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			all := needs(tc.Needed + tc.Extra)
			seed := Build(all[tc.Needed:], nil) // the extras come from a seed
			f := &fakeExercise{needs: all[:tc.Needed], perRound: 2}
			g, err := Grow(t.Context(), GrowOptions{Run: f.run, Start: seed})
			if err != nil {
				t.Fatal(err)
			}
			var items []Item
			items = append(items, Items(seed)...)
			for _, round := range g.Added {
				items = append(items, round...)
			}
			var known [][]Item
			for _, p := range g.Failed {
				known = append(known, Items(p))
			}
			f.runs = 0
			kept, st, err := Minimise(t.Context(), items, known, f.try)
			if err != nil {
				t.Fatal(err)
			}
			ref := &fakeExercise{needs: all[:tc.Needed]}
			refKept, refTrials, refRuns := referenceMinimise(t.Context(), items, ref.try)
			if len(kept) != tc.Needed || len(refKept) != tc.Needed {
				t.Fatalf("kept %d (reference %d), want %d", len(kept), len(refKept), tc.Needed)
			}
			if st.Runs >= refRuns {
				t.Errorf("with the grow history Minimise ran %d times, the reference algorithm %d: want fewer", st.Runs, refRuns)
			}
			n := len(items)
			t.Logf("n=%d: grow %d runs; minimise %d trials, %d runs, %d skipped; reference %d trials, %d runs (bound %d, %d)",
				n, g.Rounds, st.Trials, st.Runs, st.Skipped, refTrials, refRuns, 2*n-1, 4*n-2)
		})
	}
}

func TestItemsBuildRoundTrip(t *testing.T) {
	src := "# header\n[read]\n# why\n/usr/lib\n/etc/passwd\n[execute]\n/usr/bin\n[write]\n/dev/null\n[connect]\nallow 127.0.0.1:*\n[bind]\nallow 0\n[limits]\ntimeout=60\n"
	p, err := policy.Parse("t.cfg", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	q := Build(Items(p), p)
	if string(q.Render()) != string(p.Render()) {
		t.Errorf("Build(Items(p), p) renders\n%s\nwant\n%s", q.Render(), p.Render())
	}
	if got := len(Items(p)); got != 6 {
		t.Errorf("Items: %d, want 6", got)
	}
	if !Items(p)[0].coveredBy(p) || (Item{Section: policy.Read, Path: "/usr/lib/x"}).coveredBy(p) != placement.Covered(p, "/usr/lib/x", policy.Read) {
		t.Error("coveredBy disagrees with placement.Covered")
	}
}

// BenchmarkMinimise reports the runs Minimise takes on 64 items of which 16
// are needed, against the reference algorithm's bound (4n−2 = 254).
func BenchmarkMinimise(b *testing.B) {
	all := needs(64)
	f := &fakeExercise{needs: all[:16]}
	b.ReportAllocs()
	var runs int
	for b.Loop() {
		_, st, err := Minimise(context.Background(), all, nil, f.try)
		if err != nil {
			b.Fatal(err)
		}
		runs = st.Runs
	}
	b.ReportMetric(float64(runs), "runs")
	b.ReportMetric(float64(runs)/float64(4*len(all)-2), "x-bound")
}
