package verdict

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"sort"
)

// MaxReportBytes is the largest JUnit report ParseJUnit reads; a larger one
// is unreadable (no test framework writes one this big for an exercise).
const MaxReportBytes = 64 << 20

// maxDepth bounds element nesting, so a hostile report cannot exhaust the
// stack of a caller walking it.
const maxDepth = 256

// Case is one <testcase> of a JUnit report.
type Case struct {
	// ClassName and Name are the attributes as written (either may be "").
	ClassName string
	Name      string
	// Outcome is Passed, Failed or Skipped.
	Outcome Outcome
}

// ID is the test's identity: "classname.name", or the name alone when the
// report gives no class name.
func (c Case) ID() string {
	if c.ClassName == "" {
		return c.Name
	}
	return c.ClassName + "." + c.Name
}

// ParseJUnit reads one JUnit XML report. It returns every test case in
// document order, or an error when the data is not a complete JUnit report
// (bad XML, cut short, another root element, a test case without a name).
// An error means no result: the cases read before it are not returned.
func ParseJUnit(data []byte) ([]Case, error) {
	if len(data) > MaxReportBytes {
		return nil, fmt.Errorf("junit: report is %d bytes, want at most %d", len(data), MaxReportBytes)
	}
	r := &junitReader{d: xml.NewDecoder(bytes.NewReader(data))}
	r.d.Strict = true
	for {
		tok, err := r.d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("junit: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			err = r.start(t)
		case xml.EndElement:
			r.end(t)
		case xml.CharData:
			if len(r.stack) == 0 && len(bytes.TrimSpace(t)) > 0 {
				err = errors.New("junit: text outside the root element")
			}
		}
		if err != nil {
			return nil, err
		}
	}
	if !r.root {
		return nil, errors.New("junit: no root element")
	}
	if len(r.stack) != 0 {
		return nil, fmt.Errorf("junit: report ends inside <%s>", r.stack[len(r.stack)-1])
	}
	return r.cases, nil
}

// junitReader is ParseJUnit's state between tokens.
type junitReader struct {
	d     *xml.Decoder
	cases []Case
	stack []string // the open elements
	cur   *Case    // the open <testcase>, if any
	root  bool     // whether the root element was seen
}

// start takes an element's start: the root's, a test case's, or a child
// of the open test case that decides its outcome.
func (r *junitReader) start(t xml.StartElement) error {
	name := t.Name.Local
	if len(r.stack) == 0 {
		if r.root {
			return fmt.Errorf("junit: a second root element <%s>", name)
		}
		if name != "testsuites" && name != "testsuite" {
			return fmt.Errorf("junit: root element is <%s>, want <testsuites> or <testsuite>", name)
		}
		r.root = true
	}
	if len(r.stack) == maxDepth {
		return fmt.Errorf("junit: elements nested deeper than %d", maxDepth)
	}
	switch {
	case name == "testcase" && r.cur == nil:
		c, err := r.testCase(t)
		if err != nil {
			return err
		}
		r.cases = append(r.cases, c)
		r.cur = &r.cases[len(r.cases)-1]
	case r.cur != nil && len(r.stack) > 0 && r.stack[len(r.stack)-1] == "testcase":
		// A direct child of the open test case decides its outcome.
		switch name {
		case "failure", "error":
			r.cur.Outcome = Failed
		case "skipped":
			if r.cur.Outcome == Passed {
				r.cur.Outcome = Skipped
			}
		}
	}
	r.stack = append(r.stack, name)
	return nil
}

// testCase is a <testcase>'s case, passed until a child says otherwise.
func (r *junitReader) testCase(t xml.StartElement) (Case, error) {
	c := Case{Outcome: Passed}
	named := false
	for _, a := range t.Attr {
		switch a.Name.Local {
		case "classname":
			c.ClassName = a.Value
		case "name":
			c.Name, named = a.Value, true
		}
	}
	if !named || c.Name == "" {
		line, _ := r.d.InputPos()
		return Case{}, fmt.Errorf("junit: line %d: <testcase> without a name", line)
	}
	return c, nil
}

// end takes an element's end, closing the test case it ends.
func (r *junitReader) end(t xml.EndElement) {
	r.stack = r.stack[:len(r.stack)-1]
	if t.Name.Local == "testcase" && r.cur != nil && !inStack(r.stack, "testcase") {
		r.cur = nil
	}
}

func inStack(stack []string, name string) bool {
	for _, s := range stack {
		if s == name {
			return true
		}
	}
	return false
}

// Report is one JUnit report file a run left in its working directory.
type Report struct {
	// Path is the report's path relative to the working directory, with
	// forward slashes; it names the report in an "unreadable" pair.
	Path string
	// Data is the file's content. Err, if set, says why it could not be
	// read; the report then counts as unreadable.
	Data []byte
	Err  error
}

// tests reads every report into sorted, unique (id, outcome) pairs, with the
// names of every test (for the log-position rule of infra failures), and
// whether some report was unreadable.
func tests(reports []Report) (pairs []Test, names []string, unreadable bool) {
	seen := map[Test]bool{}
	for _, r := range reports {
		var cases []Case
		err := r.Err
		if err == nil {
			cases, err = ParseJUnit(r.Data)
		}
		if err != nil {
			unreadable = true
			seen[Test{ID: r.Path, Outcome: Unreadable}] = true
			continue
		}
		for _, c := range cases {
			seen[Test{ID: c.ID(), Outcome: c.Outcome}] = true
			names = append(names, c.Name)
		}
	}
	pairs = make([]Test, 0, len(seen))
	for t := range seen {
		pairs = append(pairs, t)
	}
	sort.Slice(pairs, func(i, j int) bool { return pairs[i].less(pairs[j]) })
	return pairs, names, unreadable
}
