package policy

import (
	"fmt"
	"math"
	"time"
)

// This file holds the policy model shared by every package (enforcer,
// pruner, observer, orchestrator). The names here are stable: extend, never
// rename.

// Section is one of a policy file's sections, spelled as in the file without
// brackets.
type Section string

// The sections of the grammar. Accept is recognised only to be refused with a
// reason (lockstep has no inbound proxy).
const (
	Read          Section = "read"
	Execute       Section = "execute"
	Write         Section = "write"
	Create        Section = "create"
	CreateIPC     Section = "create-ipc"
	CreateSymlink Section = "create-symlink"
	Delete        Section = "delete"
	Restructure   Section = "restructure"
	Ioctl         Section = "ioctl"
	Connect       Section = "connect"
	Bind          Section = "bind"
	Accept        Section = "accept"
	Limits        Section = "limits"
)

// FilesystemSections lists the path sections in canonical render order.
var FilesystemSections = []Section{Read, Execute, Write, Create, CreateIPC, CreateSymlink, Delete, Restructure, Ioctl}

// Transport is a network rule's protocol.
type Transport string

// Transports. A row without a transport word is TCP.
const (
	TCP Transport = "tcp"
	UDP Transport = "udp"
)

// ConnectRule is one `[connect] allow <host>[:<port>] [tcp|udp]` row.
type ConnectRule struct {
	// Host as written after canonicalisation: "*", "localhost", an address,
	// an address/prefix, or a DNS name. Brackets around IPv6 are not kept.
	Host string
	// Port is 1–65535, or 0 for "every port" (`*` or no port written).
	Port      int
	Transport Transport
	// Comment is the text of the `# …` line written above the row, if any.
	Comment string
}

// BindRule is one `[bind] allow <port> [tcp|udp]` row. Port 0 grants only a
// kernel-chosen (ephemeral) port.
type BindRule struct {
	Port      int
	Transport Transport
	Comment   string
}

// LimitKey is a `[limits]` key.
type LimitKey string

// The limit keys in canonical render order (see LimitKeys).
const (
	Timeout LimitKey = "timeout"  // seconds, at most 3 decimals; stored in milliseconds
	CPU     LimitKey = "cpu"      // seconds of CPU time (RLIMIT_CPU)
	MemMB   LimitKey = "mem_mb"   // address space in MiB (RLIMIT_AS)
	NProc   LimitKey = "nproc"    // processes of the uid (RLIMIT_NPROC)
	NoFile  LimitKey = "nofile"   // open descriptors (RLIMIT_NOFILE)
	FsizeMB LimitKey = "fsize_mb" // largest file in MiB (RLIMIT_FSIZE)
)

// LimitKeys lists the limit keys in canonical render order.
var LimitKeys = []LimitKey{Timeout, CPU, MemMB, NProc, NoFile, FsizeMB}

// Limit is one effective limit. Off means a zero spelling switched the limit
// off (it beats every finite value when files are combined).
type Limit struct {
	// Value is the limit in the key's unit; for Timeout it is milliseconds.
	Value int64
	Off   bool
}

// Duration is a timeout (kept in milliseconds) or cpu (seconds) limit as a
// time.Duration; 0 when the limit is off. It refuses any other key, a negative
// value and one whose nanoseconds do not fit an int64, instead of wrapping:
// Parse never yields such a value (MaxSeconds; FuzzParse checks it), but a
// policy built in code may.
func (l Limit) Duration(k LimitKey) (time.Duration, error) {
	unit := map[LimitKey]time.Duration{Timeout: time.Millisecond, CPU: time.Second}[k]
	switch {
	case unit == 0:
		return 0, fmt.Errorf("[limits] %s is not a duration; only timeout and cpu are", k)
	case l.Off:
		return 0, nil
	case l.Value < 0 || l.Value > math.MaxInt64/int64(unit):
		return 0, fmt.Errorf("[limits] %s=%s does not fit a duration; at most %d seconds", k, l.Format(k), MaxSeconds)
	}
	return time.Duration(l.Value) * unit, nil
}

// Policy is a parsed, combined policy: what a set of .cfg files grants.
// The zero value grants nothing. Paths are absolute and lexically normal.
type Policy struct {
	// FS maps a path to the sections that name it.
	FS map[string]map[Section]bool
	// Connect and Bind keep first-seen order, without duplicates.
	Connect []ConnectRule
	Bind    []BindRule
	// Limits holds only the keys some file named.
	Limits map[LimitKey]Limit
	// Comments maps a path to the comment written above its first row.
	Comments map[string]string
	// Header holds the file's leading comment lines, without "# ".
	Header []string
}
