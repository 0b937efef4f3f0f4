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
	d := xml.NewDecoder(bytes.NewReader(data))
	d.Strict = true
	var (
		cases []Case
		stack []string
		cur   *Case // the open <testcase>, if any
		root  bool
	)
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("junit: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			name := t.Name.Local
			if len(stack) == 0 {
				if root {
					return nil, fmt.Errorf("junit: a second root element <%s>", name)
				}
				if name != "testsuites" && name != "testsuite" {
					return nil, fmt.Errorf("junit: root element is <%s>, want <testsuites> or <testsuite>", name)
				}
				root = true
			}
			if len(stack) == maxDepth {
				return nil, fmt.Errorf("junit: elements nested deeper than %d", maxDepth)
			}
			switch {
			case name == "testcase" && cur == nil:
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
					line, _ := d.InputPos()
					return nil, fmt.Errorf("junit: line %d: <testcase> without a name", line)
				}
				cases = append(cases, c)
				cur = &cases[len(cases)-1]
			case cur != nil && len(stack) > 0 && stack[len(stack)-1] == "testcase":
				// A direct child of the open test case decides its outcome.
				switch name {
				case "failure", "error":
					cur.Outcome = Failed
				case "skipped":
					if cur.Outcome == Passed {
						cur.Outcome = Skipped
					}
				}
			}
			stack = append(stack, name)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
			if t.Name.Local == "testcase" && cur != nil && !inStack(stack, "testcase") {
				cur = nil
			}
		case xml.CharData:
			if len(stack) == 0 && len(bytes.TrimSpace(t)) > 0 {
				return nil, errors.New("junit: text outside the root element")
			}
		}
	}
	if !root {
		return nil, errors.New("junit: no root element")
	}
	if len(stack) != 0 {
		return nil, fmt.Errorf("junit: report ends inside <%s>", stack[len(stack)-1])
	}
	return cases, nil
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
