package cli

import (
	"flag"
	"fmt"
	"strings"
)

// StrictFlag is a string flag that refuses an empty value and a second,
// different value. For a flag that guards something, taking "" as "not
// given" or letting the last of two win fails open: run --expect-hash ”
// switched the hash check off, and --pin ” built the default kernel.
type StrictFlag struct {
	value *string
	set   bool
	want  func() string // what a value must be, for the messages
}

// String is the value.
func (f *StrictFlag) String() string {
	if f == nil || f.value == nil {
		return ""
	}
	return *f.value
}

// Set takes a value, refusing an empty one and a second, different one.
func (f *StrictFlag) Set(s string) error {
	if s == "" {
		return fmt.Errorf("an empty value names nothing; want %s", f.want())
	}
	if f.set && s != *f.value {
		return fmt.Errorf("given twice, as %q and %q; give it once", *f.value, s)
	}
	*f.value, f.set = s, true
	return nil
}

// StrictVar defines a StrictFlag on fs storing into p, which starts as def.
func StrictVar(fs *flag.FlagSet, p *string, name, def, usage string, want func() string) {
	*p = def
	fs.Var(&StrictFlag{value: p, want: want}, name, usage)
}

// StrictString is StrictVar into a new string.
func StrictString(fs *flag.FlagSet, name, def, usage string, want func() string) *string {
	p := new(string)
	StrictVar(fs, p, name, def, usage, want)
	return p
}

// StrictList is a repeatable string flag that refuses an empty value.
type StrictList struct {
	Values *MultiFlag
	Want   func() string
}

// String is the values, comma-separated.
func (l StrictList) String() string {
	if l.Values == nil {
		return ""
	}
	return l.Values.String()
}

// Set adds a value, refusing an empty one.
func (l StrictList) Set(s string) error {
	if s == "" {
		return fmt.Errorf("an empty value names nothing; want %s", l.Want())
	}
	return l.Values.Set(s)
}

// MultiFlag collects a repeatable string flag (--config A --config B).
type MultiFlag []string

// String is the values, comma-separated.
func (m *MultiFlag) String() string { return strings.Join(*m, ",") }

// Set adds a value.
func (m *MultiFlag) Set(s string) error { *m = append(*m, s); return nil }
