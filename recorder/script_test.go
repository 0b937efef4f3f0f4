package recorder

import (
	"strings"
	"testing"
	"time"
)

func TestParseScript(t *testing.T) {
	s, err := ParseScript(strings.NewReader("# a comment\n\nsend import os\nkey enter\nexpect >>> 5\nexpect a b\nidle 0.5\nsleep 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		op, text, re string
		wait         time.Duration
		line         int
	}{
		{OpSend, "import os", "", 0, 3}, {OpKey, "\r", "", 0, 4}, {OpExpect, "", ">>>", 5 * time.Second, 5},
		{OpExpect, "", "a b", DefaultExpectTimeout, 6}, {OpIdle, "", "", 500 * time.Millisecond, 7}, {OpSleep, "", "", time.Second, 8},
	}
	if len(s.Steps) != len(want) {
		t.Fatalf("%d steps, want %d", len(s.Steps), len(want))
	}
	for i, w := range want {
		st := s.Steps[i]
		re := ""
		if st.Expect != nil {
			re = st.Expect.String()
		}
		if st.Op != w.op || st.Text != w.text || re != w.re || st.Wait != w.wait || st.Line != w.line {
			t.Errorf("step %d = %+v, want %+v", i, st, w)
		}
	}
}

func TestParseScriptNamesEveryBadLine(t *testing.T) {
	_, err := ParseScript(strings.NewReader("send ok\nkey f1\nexpect (\nidle NaN\nsleep -1\nwait 3\nsend\n"))
	if err == nil {
		t.Fatal("no error")
	}
	for _, l := range []string{"line 2:", "line 3:", "line 4:", "line 5:", "line 6:", "line 7:"} {
		if !strings.Contains(err.Error(), l) {
			t.Errorf("error %q does not name %s", err, l)
		}
	}
	if strings.Contains(err.Error(), "line 1:") {
		t.Errorf("error %q names the good line 1", err)
	}
}

func FuzzParseScript(f *testing.F) {
	f.Add("send x\nkey enter\nexpect >>> 3\nidle 1\nsleep 0.1\n")
	f.Add("expect 1e400\n")
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseScript(strings.NewReader(in))
		if err != nil {
			return
		}
		for _, st := range s.Steps {
			switch st.Op {
			case OpExpect:
				if st.Expect == nil || st.Wait <= 0 || st.Wait > maxScriptWait {
					t.Fatalf("expect step %+v", st)
				}
			case OpIdle, OpSleep:
				if st.Wait <= 0 || st.Wait > maxScriptWait {
					t.Fatalf("%s step wait %v", st.Op, st.Wait)
				}
			case OpSend, OpKey:
				if st.Text == "" {
					t.Fatalf("%s step without text", st.Op)
				}
			default:
				t.Fatalf("unknown op %q", st.Op)
			}
		}
	})
}
