package policy

import (
	"fmt"
	"strconv"
	"strings"
)

// Limit value bounds: a value with more significant digits, or above the
// maximum, is refused. The digit bounds are Phobos's, so a policy either
// accepts, the other does too.
const (
	maxTimeoutDigits = 15            // significant integer digits of a timeout
	maxLimitDigits   = 18            // significant digits of every other limit
	MaxMB            = 8796093022207 // largest mem_mb / fsize_mb (KiB fits in a 63-bit rlimit)
	// MaxSeconds is the largest timeout and cpu (10^9 s, about 31.7 years).
	// Either becomes a time.Duration somewhere (the enforcer's timer, the
	// pruner's measurements), whose int64 nanoseconds end at about 292
	// years: a larger value would wrap (timeout=18446744074 was a 290 ms
	// limit, 9223372037 none at all). The margin leaves room for the sums
	// made from a limit, such as a kill grace.
	MaxSeconds = 1_000_000_000
)

func (p *parser) limit(n int, s string) {
	eq := strings.IndexByte(s, '=')
	if eq < 0 {
		p.errorf(n, "[limits] row %q is not key=value (keys: timeout, cpu, mem_mb, nproc, nofile, fsize_mb)", s)
		return
	}
	key, val := LimitKey(trim(s[:eq])), trim(s[eq+1:])
	l, msg := ParseLimit(key, val)
	if msg != nil {
		p.errorf(n, "[limits] %v", msg)
		return
	}
	p.pol.Limits[key] = combineLimit(p.pol.Limits[key], l, p.pol.hasLimit(key))
}

func (p *Policy) hasLimit(k LimitKey) bool { _, ok := p.Limits[k]; return ok }

// ParseLimit checks one [limits] value for key. timeout is seconds with no
// or exactly three decimals (stored in milliseconds); the others are plain
// ASCII digits. A zero spelling ("0", "000", "0.000") switches the limit off.
func ParseLimit(key LimitKey, val string) (Limit, error) {
	known := false
	for _, k := range LimitKeys {
		known = known || k == key
	}
	if !known {
		return Limit{}, fmt.Errorf("unknown key %q; known keys: timeout, cpu, mem_mb, nproc, nofile, fsize_mb", key)
	}
	intPart, frac, hasFrac := val, "", false
	if key == Timeout {
		intPart, frac, hasFrac = strings.Cut(val, ".")
	}
	if !allDigits(intPart) || hasFrac && (len(frac) != 3 || !allDigits(frac)) {
		if key == Timeout {
			return Limit{}, fmt.Errorf("timeout %q is not seconds with no or exactly three decimals (e.g. 90 or 1.500)", val)
		}
		return Limit{}, fmt.Errorf("%s %q is not a whole number of ASCII digits", key, val)
	}
	sig := strings.TrimLeft(intPart, "0")
	maxDigits := maxLimitDigits
	if key == Timeout {
		maxDigits = maxTimeoutDigits
	}
	if len(sig) > maxDigits {
		return Limit{}, fmt.Errorf("%s %q has more than %d significant digits", key, val, maxDigits)
	}
	v, _ := strconv.ParseInt("0"+sig, 10, 64)
	if key == Timeout {
		ms := int64(0)
		if hasFrac {
			ms, _ = strconv.ParseInt(frac, 10, 64)
		}
		v = v*1000 + ms
	}
	if (key == MemMB || key == FsizeMB) && v > MaxMB {
		return Limit{}, fmt.Errorf("%s %q is larger than %d", key, val, int64(MaxMB))
	}
	if key == Timeout && v > MaxSeconds*1000 || key == CPU && v > MaxSeconds {
		return Limit{}, fmt.Errorf("%s %q is more than %d seconds (about 31 years); write 0 for no limit", key, val, MaxSeconds)
	}
	if v == 0 {
		return Limit{Off: true}, nil
	}
	return Limit{Value: v}, nil
}

// combineLimit merges b into a (present tells whether a was set): a zero
// spelling switches the limit off and wins, else the largest value.
func combineLimit(a, b Limit, present bool) Limit {
	if !present {
		return b
	}
	if a.Off || b.Off {
		return Limit{Off: true}
	}
	if b.Value > a.Value {
		return b
	}
	return a
}
