package funclen

import (
	"reflect"
	"testing"
)

// The limits: no function over maxLines, and few over warnLines.
// maxOverWarn is how many functions over warnLines there were when it was
// last lowered: the count may fall, never rise. Lower it when it falls.
const (
	maxLines    = 100
	warnLines   = 60
	maxOverWarn = 23
)

// TestFunctionLength fails on any non-test, non-generated function of the
// module over maxLines lines, and on more than maxOverWarn over warnLines.
// With -v it lists every function over warnLines, longest first.
func TestFunctionLength(t *testing.T) {
	funcs, err := Measure("../..")
	if err != nil {
		t.Fatal(err)
	}
	over := 0
	for _, f := range funcs {
		if f.Lines > warnLines {
			over++
			t.Log(f)
		}
		if f.Lines > maxLines {
			t.Errorf("%s: over %d lines; split it into helpers with one job each", f, maxLines)
		}
	}
	if over > maxOverWarn {
		t.Errorf("%d functions are over %d lines, %d were when maxOverWarn was set: split the new ones (go test -v lists them)", over, warnLines, maxOverWarn)
	}
	t.Logf("%d functions over %d lines", over, warnLines)
}

// TestMeasure checks the measurer on a fixed tree: test files, generated
// files and testdata directories are left out; methods name their receiver.
func TestMeasure(t *testing.T) {
	got, err := Measure("testdata/tree")
	if err != nil {
		t.Fatal(err)
	}
	want := []Func{
		{File: "sub/b.go", Line: 5, Name: "(S).value", Lines: 5},
		{File: "a.go", Line: 11, Name: "(*T).method", Lines: 4},
		{File: "a.go", Line: 5, Name: "three", Lines: 3},
		{File: "a.go", Line: 3, Name: "one", Lines: 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Measure(testdata/tree) =\n%v\nwant\n%v", got, want)
	}
}
