package recorder

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"

	"github.com/lockstep-sandbox/lockstep/derive/limits"
	"github.com/lockstep-sandbox/lockstep/derive/placement"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/landlock"
)

// Files Generate writes into the recording.
const (
	PolicyFile   = "policy.cfg"
	RecordFile   = "record.json"
	RecordSchema = 1
)

// Statuses of Generate beyond StatusOK, most severe first.
const (
	// StatusRefused: lockstep policy check refuses the generated policy.
	StatusRefused = 5
	// StatusCreatedRead: a [read] or [execute] row names a path no
	// session found before it ran.
	StatusCreatedRead = 4
	// StatusIncomplete: a call could not be mapped, or no policy can
	// grant what it needs; the header says INCOMPLETE.
	StatusIncomplete = 6
)

// maxCalls is how many calls record.json lists behind each grant.
const maxCalls = 3

// Record is record.json: what the policy grants and why.
type Record struct {
	Schema   int      `json:"schema"`
	Status   int      `json:"status"`
	Why      []string `json:"why"`
	Sessions []string `json:"sessions"`
	// PolicyHash is the generated policy's policy.Hash.
	PolicyHash string     `json:"policy_hash"`
	Grants     []GrantWhy `json:"grants"`
	// Widenings are the grants placed on another path than their object.
	Widenings []Widening `json:"widenings"`
	// Ungrantable are the accesses no policy grants (each call's first
	// sighting), and NotPlaced the needs a placement rule refused.
	Ungrantable []Ungranted `json:"ungrantable"`
	NotPlaced   []string    `json:"not_placed"`
	// Moves lists the cross-directory renames and links.
	Moves []string `json:"moves"`
	// ServerNames lists the [connect] rows named by a TLS ClientHello's
	// server name, each with the address the session reached.
	ServerNames []string `json:"server_names,omitempty"`
	// Limits is how [limits] was derived (generate --limits; nil without).
	Limits *LimitsWhy `json:"limits,omitempty"`
}

// LimitsWhy is how [limits] came from the sessions' samples.
type LimitsWhy struct {
	// Measurements are the sessions' samples, in session order.
	Measurements []limits.Measurement `json:"measurements"`
	// Derived are the limits written, as [limits] lines.
	Derived []string `json:"derived"`
	// MemMB says why mem_mb was or was not derived.
	MemMB string `json:"mem_mb"`
}

// GenerateOptions configure Generate.
type GenerateOptions struct {
	// Limits derives [limits] from the sessions' samples (every session
	// recorded with run --sample) with the layer pruner's margins.
	Limits bool
	// MemoryPinned derives mem_mb too, as an exercise's heap_pinned does
	// for the layer pruner: the program's memory is pinned (a JVM's -Xmx,
	// a fixed heap), so its peak is its need. Without it mem_mb is left
	// to the default, as a program whose memory grows with its input
	// would be cut short by a limit taken from one session. Needs Limits.
	MemoryPinned bool
	// AddressSpaceUnbounded writes mem_mb=0, as an exercise's
	// address_space_unbounded does: the program reserves far more address
	// space than it uses (a sanitizer's shadow memory, a JVM's reserved
	// heap), so RLIMIT_AS would stop it at start-up whatever it needs,
	// and a base's mem_mb must be switched off. Needs Limits; not with
	// MemoryPinned.
	AddressSpaceUnbounded bool
}

// GrantWhy is one row of the policy and the first calls behind it.
type GrantWhy struct {
	Row   string   `json:"row"`
	Calls []string `json:"calls"`
}

// Widening is a grant on another path than the object that asked for it.
type Widening struct {
	Object string `json:"object"`
	Row    string `json:"row"`
	Reason string `json:"reason"`
}

// Ungranted is a call whose access no policy grants.
type Ungranted struct {
	Call   string `json:"call"`
	Layer  string `json:"layer"`
	Reason string `json:"reason"`
}

// Generated is Generate's result.
type Generated struct {
	Policy *policy.Policy
	Record *Record
}

// sighting is one observation with the call behind it.
type sighting struct {
	o    placement.Observation
	call string
}

// collected is every session's needs, ready for placement (derive/placement).
type collected struct {
	sightings []sighting
	net       []placement.NetNeed
	netCalls  []string
	netNames  []string // each net need's TLS server name, "" none
	served    []placement.Endpoint
	existed   map[string]Entry
	record    *Record
	ungranted map[string]bool
	// moves are the (source, destination) directories of each move.
	moves [][2]string
	// samples are the sessions' measurements; unsampled the sessions
	// recorded without run --sample.
	samples   []limits.Measurement
	unsampled []string
}

// Generate turns every session of the recording into a policy and its
// record, with the shared placement (placement.Grants, its
// execute narrowing and compaction, placement.NetworkRules), and writes
// both into the recording. The status is StatusOK or one of Generate's.
func Generate(rec string, opts GenerateOptions) (*Generated, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	c, err := collect(rec)
	if err != nil {
		return nil, err
	}
	p := c.place()
	if opts.Limits {
		if err := c.limits(p, opts); err != nil {
			return nil, err
		}
	}
	c.judge(p)
	p.Header = header(len(c.record.Sessions), c.record)
	return finish(rec, p, c.record)
}

// check refuses options that do not go together, naming what is wanted.
func (o GenerateOptions) check() error {
	switch {
	case o.MemoryPinned && o.AddressSpaceUnbounded:
		return errors.New("memory pinned and address space unbounded: mem_mb is either derived (--memory-pinned) or off (--address-space-unbounded); give one")
	case o.MemoryPinned && !o.Limits:
		return errors.New("memory pinned: mem_mb is one of the limits; ask for the limits too")
	case o.AddressSpaceUnbounded && !o.Limits:
		return errors.New("address space unbounded: mem_mb is one of the limits; ask for the limits too")
	}
	return nil
}

// collect reads every session of the recording; a failed one is an error.
func collect(rec string) (*collected, error) {
	sessions, err := Sessions(rec)
	if err != nil {
		return nil, err
	}
	c := &collected{existed: map[string]Entry{}, record: &Record{Schema: RecordSchema, Why: []string{}, Grants: []GrantWhy{},
		Widenings: []Widening{}, Ungrantable: []Ungranted{}, NotPlaced: []string{}, Moves: []string{}}, ungranted: map[string]bool{}}
	for k, s := range sessions {
		if why := s.Record.Failed(); why != "" {
			return nil, fmt.Errorf("session %s failed (%s): remove it or record it again", s.Dir, why)
		}
		name, _ := filepath.Rel(rec, s.Dir)
		c.record.Sessions = append(c.record.Sessions, name)
		c.add(k+1, name, s.Record)
		if s.Record.Limits != nil {
			c.samples = append(c.samples, *s.Record.Limits)
		} else {
			c.unsampled = append(c.unsampled, name)
		}
	}
	return c, nil
}

// limits sets p's [limits] from the sessions' samples with the layer
// pruner's margins (limits.Margins over limits.Max); every session must
// have been sampled.
func (c *collected) limits(p *policy.Policy, opts GenerateOptions) error {
	if len(c.unsampled) > 0 {
		return fmt.Errorf("limits: sessions %v were recorded without --sample: record them again with --sample, or generate without the limits", c.unsampled)
	}
	p.Limits = limits.Margins(limits.Max(c.samples...), limits.Options{HeapPinned: opts.MemoryPinned, AddressSpaceUnbounded: opts.AddressSpaceUnbounded})
	why := &LimitsWhy{Measurements: c.samples, MemMB: "mem_mb not derived (the program's memory is not declared pinned): the default applies"}
	switch {
	case opts.MemoryPinned:
		why.MemMB = "mem_mb derived: the program's memory is declared pinned (--memory-pinned)"
	case opts.AddressSpaceUnbounded:
		why.MemMB = "mem_mb=0 (off): the program's address space is declared unbounded (--address-space-unbounded)"
	}
	for _, k := range slices.Sorted(maps.Keys(p.Limits)) {
		why.Derived = append(why.Derived, fmt.Sprintf("%s=%s", k, p.Limits[k].Format(k)))
	}
	c.record.Limits = why
	return nil
}

// add collects one session's uses.
func (c *collected) add(run int, name string, s *SessionRecord) {
	for _, e := range s.Existed {
		c.existed[e.Path] = e
	}
	for _, u := range s.Uses {
		call := fmt.Sprintf("%s line %d: %s", name, u.Line, u.Call)
		if !u.grantable() {
			c.ungrantable(u, call)
			continue
		}
		for _, n := range u.Needs {
			for _, sec := range n.Sections {
				c.sightings = append(c.sightings, sighting{placement.Observation{Path: n.Path, Section: section(sec), Run: run, TGID: u.TGID, TID: u.PID}, call})
			}
		}
		c.move(run, u, call)
		for _, n := range u.Net {
			c.net = append(c.net, placement.NetNeed{Section: section(n.Section), Addr: n.Addr, Port: n.Port, Transport: policy.Transport(n.Transport)})
			c.netCalls = append(c.netCalls, call)
			c.netNames = append(c.netNames, n.Name)
			if n.Section == string(policy.Bind) && n.Port > 0 {
				c.served = append(c.served, placement.Endpoint{Port: n.Port, Transport: policy.Transport(n.Transport)})
			}
		}
	}
}

// move adds what a rename or link between two directories needs beyond
// attribution's make and remove rights: the refer right on both parents
// ([restructure]), as the pruner grants after Landlock's EXDEV.
func (c *collected) move(run int, u Use, call string) {
	if (u.Op != "rename" && u.Op != "link") || len(u.Needs) < 2 || u.Needs[0].Path == u.Needs[1].Path {
		return
	}
	c.record.Moves = append(c.record.Moves, fmt.Sprintf("%s: %s → %s", call, u.Needs[0].Path, u.Needs[1].Path))
	c.moves = append(c.moves, [2]string{u.Needs[0].Path, u.Needs[1].Path})
	for _, n := range u.Needs[:2] {
		sec := policy.Section(landlock.Refer.Section())
		c.sightings = append(c.sightings, sighting{placement.Observation{Path: n.Path, Section: sec, Run: run, TGID: u.TGID, TID: u.PID}, call})
	}
}

func (c *collected) ungrantable(u Use, call string) {
	key := u.Layer + "\x00" + u.Reason
	if c.ungranted[key] {
		return
	}
	c.ungranted[key] = true
	c.record.Ungrantable = append(c.record.Ungrantable, Ungranted{Call: call, Layer: u.Layer, Reason: u.Reason})
}

// env is the placement's view of the machine: what the sessions found
// before they ran, climbing anywhere below the top-level directories.
func (c *collected) env() placement.Env {
	return placement.Env{Existed: func(p string) (bool, bool) {
		e, ok := c.existed[p]
		return ok, e.Dir
	}, Scanned: []string{"/"}}
}
