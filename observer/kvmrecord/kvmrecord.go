package kvmrecord

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
	"github.com/lockstep-sandbox/lockstep/landlock"
	"github.com/lockstep-sandbox/lockstep/record"
)

// ABI10 is the Landlock ABI a KVM record must have observed: the first
// with UDP port rules, which the record's rows are.
const ABI10 = landlock.ABIUDP

// The schema version and file name suffixes, as Phobos's orchestrator has
// them: the record <key>_<exercise>.abi10.json and its sidecar
// <key>_<exercise>.abi10.cfg.
const (
	Schema       = 1
	Suffix       = ".abi10.json"
	ConfigSuffix = ".abi10.cfg"
)

// Record is the KVM record <key>_<exercise>.abi10.json (schema 1): what the
// observer saw of one exercise in a guest on a pinned kernel.
type Record struct {
	SchemaVersion int               `json:"schema_version"`
	Key           string            `json:"key"`
	Exercise      string            `json:"exercise"`
	Provenance    record.Provenance `json:"provenance"`
	// Kernel is the guest kernel's release; LandlockABI its Landlock ABI.
	Kernel      string `json:"kernel"`
	LandlockABI int    `json:"landlock_abi"`
	// VerifiedCfgSHA256 is record.SHA256Hex of the .cfg the run verified; nil
	// (null) when it stopped before reading it.
	VerifiedCfgSHA256 *string `json:"verified_cfg_sha256"`
	// ABI10CfgSHA256 is record.SHA256Hex of the .abi10.cfg sidecar; nil (null)
	// when no sidecar was written.
	ABI10CfgSHA256 *string `json:"abi10_cfg_sha256"`
	// CrossCheck is nil (absent) when the run stopped before it.
	CrossCheck *CrossCheck `json:"cross_check,omitempty"`
	Mismatches []Mismatch  `json:"mismatches"`
	AuditOnly  []AuditOnly `json:"audit_only"`
	Rows       []Row       `json:"rows"`
	// TimeFactor is the factor the exercise runs' timeout and cpu limits
	// were multiplied by, the guest being slower than the machine that
	// measured them (under TCG); absent (0) is 1, the policy's own limits.
	TimeFactor int  `json:"time_factor,omitempty"`
	Verified   bool `json:"verified"`
	// Aborted and Evidence are set together, on an abort only.
	Aborted  string         `json:"-"`
	Evidence map[string]any `json:"-"`
}

// CrossCheck compares strace's Landlock refusals with the kernel's audit
// records for one run.
type CrossCheck struct {
	StraceDenials int         `json:"strace_denials"`
	AuditRecords  int         `json:"audit_records"`
	Unparsed      []string    `json:"unparsed"`
	Mismatches    []Mismatch  `json:"mismatches"`
	AuditOnly     []AuditOnly `json:"audit_only"`
}

// Mismatch is a strace denial no audit record agrees with.
type Mismatch struct {
	Operation string   `json:"operation"`
	Objects   []string `json:"objects"`
	Sections  []string `json:"sections"`
	// AuditForObject are the sorted sections of every still-unmatched audit
	// denial sharing an object.
	AuditForObject [][]string `json:"audit_for_object"`
}

// AuditOnly is an audit denial no strace denial claimed; reported, never
// granted.
type AuditOnly struct {
	Objects  []string `json:"objects"`
	Sections []string `json:"sections"`
}

// Row is one ABI 10 row: a `[bind] allow <port> udp` rule and the raw audit
// records that name the refused UDP bind.
type Row struct {
	Rule  string   `json:"rule"`
	Audit []string `json:"audit"`
}

type alias Record

type aborted struct {
	alias
	Aborted  string         `json:"aborted"`
	Evidence map[string]any `json:"evidence"`
}

// MarshalJSON writes "aborted" and "evidence" only on an abort, evidence as
// {} when empty.
func (r Record) MarshalJSON() ([]byte, error) {
	if r.Aborted == "" {
		return json.Marshal(alias(r))
	}
	ev := r.Evidence
	if ev == nil {
		ev = map[string]any{}
	}
	return json.Marshal(aborted{alias(r), r.Aborted, ev})
}

// UnmarshalJSON reads the record with its optional abort members.
func (r *Record) UnmarshalJSON(b []byte) error {
	var a aborted
	if err := record.DecodeStrict(b, &a); err != nil {
		return err
	}
	*r = Record(a.alias)
	r.Aborted, r.Evidence = a.Aborted, a.Evidence
	if r.Aborted != "" && r.Evidence == nil {
		return fmt.Errorf("aborted without evidence")
	}
	if r.Aborted == "" && a.Evidence != nil {
		return fmt.Errorf("evidence without aborted")
	}
	return nil
}

// Validate returns every problem of the record at once (nil if none).
func (r *Record) Validate() error {
	var p record.Problems
	record.CheckIdentity(&p, r.SchemaVersion, Schema, r.Key, r.Exercise)
	record.CheckProvenance(&p, r.Provenance)
	if r.Kernel == "" {
		p.Add("kernel is empty")
	}
	for name, h := range map[string]*string{"verified_cfg_sha256": r.VerifiedCfgSHA256, "abi10_cfg_sha256": r.ABI10CfgSHA256} {
		if h != nil && !record.IsSHA256Hex(*h) {
			p.Add("%s %q is not a lower-case hex SHA-256 or null", name, *h)
		}
	}
	if r.TimeFactor < 0 {
		p.Add("time_factor %d is negative", r.TimeFactor)
	}
	if r.Mismatches == nil || r.AuditOnly == nil || r.Rows == nil {
		p.Add("mismatches, audit_only and rows must be lists (possibly empty)")
	}
	for i, row := range r.Rows {
		if port, ok := policy.UDPBindRow(row.Rule); !ok {
			p.Add("rows[%d].rule %q is not allow <port> udp", i, row.Rule)
		} else if port > 65535 {
			p.Add("rows[%d].rule %q has a port above 65535", i, row.Rule)
		}
		if len(row.Audit) == 0 {
			p.Add("rows[%d] (%s) has no audit record behind it", i, row.Rule)
		}
	}
	if r.Verified {
		if r.Aborted != "" {
			p.Add("verified but aborted (%q)", r.Aborted)
		}
		if len(r.Mismatches) > 0 {
			p.Add("verified with %d mismatches", len(r.Mismatches))
		}
		if r.LandlockABI < ABI10 {
			p.Add("verified on Landlock ABI %d, want %d or more", r.LandlockABI, ABI10)
		}
		if r.VerifiedCfgSHA256 == nil {
			p.Add("verified without verified_cfg_sha256")
		}
		if r.CrossCheck == nil {
			p.Add("verified without a cross_check")
		}
	}
	if len(r.Rows) > 0 && r.ABI10CfgSHA256 == nil && r.Verified {
		p.Add("verified with %d rows but no abi10_cfg_sha256", len(r.Rows))
	}
	if r.Aborted != "" && strings.ContainsAny(r.Aborted, "\n\r") {
		p.Add("aborted %q is not one line", r.Aborted)
	}
	return p.Err(r.Key + "_" + r.Exercise + Suffix)
}

// Vouches reports whether the record verified cfg (the exercise's .cfg) and
// describes sidecar (the .abi10.cfg; nil when there is none).
func (r *Record) Vouches(cfg, sidecar []byte) error {
	stem := r.Key + "_" + r.Exercise
	if r.VerifiedCfgSHA256 == nil || *r.VerifiedCfgSHA256 != record.SHA256Hex(cfg) {
		return fmt.Errorf("%s.abi10.json verified another %s.cfg than the one beside it", stem, stem)
	}
	switch {
	case sidecar == nil && r.ABI10CfgSHA256 != nil:
		return fmt.Errorf("%s.abi10.json records a %s.abi10.cfg that is not there", stem, stem)
	case sidecar != nil && (r.ABI10CfgSHA256 == nil || *r.ABI10CfgSHA256 != record.SHA256Hex(sidecar)):
		return fmt.Errorf("%s.abi10.cfg is not the file %s.abi10.json records: its SHA-256 differs", stem, stem)
	}
	return nil
}

// Parse reads and validates a KVM record.
func Parse(name string, data []byte) (*Record, error) {
	var r Record
	if err := record.ParseInto(name, data, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Read reads path, validates it, and checks that its name is
// <key>_<exercise>.abi10.json.
func Read(path string) (*Record, error) {
	data, err := safefile.ReadFile(path, 0)
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	r, err := Parse(path, data)
	if err != nil {
		return nil, err
	}
	return r, record.CheckName(path, r.Key, r.Exercise, Suffix)
}

// Write validates r and writes it atomically as
// dir/<key>_<exercise>.abi10.json, returning the path.
func Write(dir string, r *Record) (string, error) {
	if err := r.Validate(); err != nil {
		return "", err
	}
	return record.Write(dir, r.Key+"_"+r.Exercise+Suffix, r)
}

// Sidecar renders the .abi10.cfg for rows, as Phobos writes it: two header
// comment lines, then [bind] and the rules, sorted; LF, final newline.
func Sidecar(key, exercise string, p record.Provenance, rows []Row) []byte {
	rules := make([]string, 0, len(rows))
	for _, r := range rows {
		rules = append(rules, r.Rule)
	}
	sort.Strings(rules)
	var b strings.Builder
	fmt.Fprintf(&b, "# ABI 10 rows for %s/%s, from the KVM run on kernel %s on %s.\n", key, exercise, p.Kernel, p.Date)
	b.WriteString("# Each row is a UDP bind the kernel's own audit record names as refused; see the .abi10.json beside this file.\n")
	b.WriteString("[bind]\n")
	for _, r := range rules {
		b.WriteString(r + "\n")
	}
	return []byte(b.String())
}
