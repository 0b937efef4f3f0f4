package recorder

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Step ops of a script.
const (
	OpSend   = "send"
	OpExpect = "expect"
	OpKey    = "key"
	OpIdle   = "idle"
	OpSleep  = "sleep"
)

// DefaultExpectTimeout bounds an expect line that names no timeout.
const DefaultExpectTimeout = 30 * time.Second

// maxScriptWait bounds any one wait a script may ask for.
const maxScriptWait = time.Hour

// Keys are the names a key line takes and the bytes a terminal sends for
// them.
var Keys = map[string]string{
	"enter": "\r", "tab": "\t", "ctrl-c": "\x03", "ctrl-d": "\x04",
	"up": "\x1b[A", "down": "\x1b[B", "esc": "\x1b",
}

// Step is one line of a script.
type Step struct {
	// Line is the line number in the script (from 1).
	Line int
	Op   string
	// Text is what send and key write to the terminal (a key as its bytes).
	Text string
	// Expect is expect's expression.
	Expect *regexp.Regexp
	// Wait is expect's timeout, idle's quiet time or sleep's duration.
	Wait time.Duration
	// Source is the line as written.
	Source string
}

// Script is a parsed session script.
type Script struct {
	Steps []Step
}

// ParseScript reads a script: one step a line, `send TEXT` (TEXT written as
// it stands, no newline added), `expect REGEX [SECONDS]`, `key NAME`
// (enter, tab, ctrl-c, ctrl-d, up, down, esc), `idle SECONDS` (wait until
// the program has been quiet that long) and `sleep SECONDS`. Blank lines
// and lines starting with # are skipped. Every problem is reported with
// its line.
func ParseScript(r io.Reader) (*Script, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	s := &Script{}
	var errs []string
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), "\r")
		if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		st, err := parseStep(line)
		if err != nil {
			errs = append(errs, fmt.Sprintf("line %d: %v", n, err))
			continue
		}
		st.Line, st.Source = n, line
		s.Steps = append(s.Steps, st)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("script: %w", err)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("script: %s", strings.Join(errs, "; "))
	}
	return s, nil
}

// parseStep parses one non-blank line.
func parseStep(line string) (Step, error) {
	op, arg, _ := strings.Cut(strings.TrimLeft(line, " \t"), " ")
	switch op {
	case OpSend:
		if arg == "" {
			return Step{}, fmt.Errorf("send needs text")
		}
		return Step{Op: op, Text: arg}, nil
	case OpKey:
		k, ok := Keys[strings.TrimSpace(arg)]
		if !ok {
			return Step{}, fmt.Errorf("key %q: want one of enter, tab, ctrl-c, ctrl-d, up, down, esc", strings.TrimSpace(arg))
		}
		return Step{Op: op, Text: k}, nil
	case OpIdle, OpSleep:
		d, err := seconds(strings.TrimSpace(arg))
		if err != nil {
			return Step{}, fmt.Errorf("%s: %v", op, err)
		}
		return Step{Op: op, Wait: d}, nil
	case OpExpect:
		return parseExpect(arg)
	}
	return Step{}, fmt.Errorf("unknown step %q: want send, expect, key, idle or sleep", op)
}

// parseExpect parses `REGEX [SECONDS]`: a last word that is a number is the
// timeout.
func parseExpect(arg string) (Step, error) {
	re, wait := strings.TrimSpace(arg), DefaultExpectTimeout
	if i := strings.LastIndexAny(re, " \t"); i > 0 {
		if d, err := seconds(re[i+1:]); err == nil {
			re, wait = strings.TrimSpace(re[:i]), d
		}
	}
	if re == "" {
		return Step{}, fmt.Errorf("expect needs a regular expression")
	}
	x, err := regexp.Compile(re)
	if err != nil {
		return Step{}, fmt.Errorf("expect: %v", err)
	}
	return Step{Op: OpExpect, Expect: x, Wait: wait}, nil
}

// seconds parses a positive number of seconds up to maxScriptWait.
func seconds(s string) (time.Duration, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(f > 0 && f <= maxScriptWait.Seconds()) {
		return 0, fmt.Errorf("%q: want seconds, more than 0 and at most %d", s, int(maxScriptWait.Seconds()))
	}
	return time.Duration(f * float64(time.Second)), nil
}
