package enforcer

import (
	"fmt"
	"sort"
	"strings"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/landlock"
)

// SectionRights maps each filesystem section to the Landlock rights it
// grants (landlock.Rights says which), before masking by the running ABI:
// a right the ABI does not know is neither handled nor granted.
//
// MAKE_CHAR and MAKE_BLOCK belong to no section: they are always handled and
// never granted.
var SectionRights = func() map[policy.Section]uint64 {
	m := make(map[policy.Section]uint64, len(policy.FilesystemSections))
	for _, s := range policy.FilesystemSections {
		m[s] = landlock.SectionMask(string(s))
	}
	return m
}()

// fileRights are the rights that apply to a non-directory; a rule on a file
// keeps only these (the kernel refuses directory rights on a file).
var fileRights = landlock.FileMask()

// changeable sections can alter the file system; their paths are opened
// without following a final symlink, and a symlink there is refused.
var changeable = map[policy.Section]bool{
	policy.Write: true, policy.Create: true, policy.CreateIPC: true, policy.CreateSymlink: true,
	policy.Delete: true, policy.Restructure: true, policy.Ioctl: true,
}

// Unenforceable is one policy rule the running kernel cannot enforce.
type Unenforceable struct {
	Rule    string // the rule as written in the policy, with its section: "[bind] allow 53 udp"
	NeedABI int    // the first Landlock ABI that can enforce it
	Why     string // what the rule needs from the kernel
}

func (u Unenforceable) String() string {
	return fmt.Sprintf("%s needs Landlock ABI %d (%s)", u.Rule, u.NeedABI, u.Why)
}

// CheckEnforceable lists every rule of p that a kernel with ABI row row cannot
// enforce, in policy order. It is pure: no kernel is consulted. An empty list
// means the enforcer can apply p as written.
//
//   - TCP [connect]/[bind] rows need ABI 4 (network rules), except
//     `[bind] allow 0`: it grants only a kernel-chosen port, which a kernel
//     without network rules allows anyway (so the shipped Java base runs
//     on older kernels).
//   - UDP rows need ABI 10, every one of them: below it UDP is not restricted
//     at all, so a row would pretend a boundary that does not exist.
//   - [restructure] rows need ABI 2: below it the kernel refuses every
//     cross-directory rename or link, so the grant cannot be given.
//
// Rights that an older ABI simply does not restrict (TRUNCATE before 3,
// IOCTL_DEV before 5, RESOLVE_UNIX before 9, scopes before 6) make a grant
// vacuous, not false; the status line's handled= field says what is held.
func CheckEnforceable(p *policy.Policy, row ABIRow) []Unenforceable {
	var out []Unenforceable
	if p == nil {
		return nil
	}
	for _, path := range sortedPaths(p) {
		if p.FS[path][policy.Restructure] && row.FS&landlock.FSRefer == 0 {
			out = append(out, Unenforceable{Rule: "[restructure] " + path, NeedABI: landlock.ABIRefer, Why: "REFER, renaming or linking across directories"})
		}
	}
	for _, c := range p.Connect {
		rule := "[connect] " + c.String()
		switch {
		case c.Transport == policy.UDP && row.Net&landlock.NetConnectSendUDP == 0:
			out = append(out, Unenforceable{Rule: rule, NeedABI: landlock.ABIUDP, Why: "UDP port rules"})
		case c.Transport != policy.UDP && row.Net&landlock.NetConnectTCP == 0:
			out = append(out, Unenforceable{Rule: rule, NeedABI: landlock.ABINetwork, Why: "TCP port rules"})
		}
	}
	for _, b := range p.Bind {
		rule := "[bind] " + b.String()
		switch {
		case b.Transport == policy.UDP && row.Net&landlock.NetBindUDP == 0:
			out = append(out, Unenforceable{Rule: rule, NeedABI: landlock.ABIUDP, Why: "UDP port rules"})
		case b.Transport != policy.UDP && b.Port != 0 && row.Net&landlock.NetBindTCP == 0:
			out = append(out, Unenforceable{Rule: rule, NeedABI: landlock.ABINetwork, Why: "TCP port rules"})
		}
	}
	return out
}

func sortedPaths(p *policy.Policy) []string {
	paths := make([]string, 0, len(p.FS))
	for path := range p.FS {
		paths = append(paths, path)
	}
	sort.Strings(paths)
	return paths
}

// PathRule is one path-beneath rule of a ruleset.
type PathRule struct {
	Path   string `json:"path"`
	Access uint64 `json:"access"`
	// NoFollow opens the path without following a final symlink (a
	// changeable section names it).
	NoFollow bool `json:"nofollow,omitempty"`
	// Open is the path the child opens, with no symbolic link allowed:
	// Path with its links resolved when the policy was checked
	// (resolvePathRules); "" opens Path itself.
	Open string `json:"open,omitempty"`
}

// PortRule is one net-port rule of a ruleset.
type PortRule struct {
	Port   uint16 `json:"port"`
	Access uint64 `json:"access"`
}

// Ruleset is what the restricted child hands to Landlock: the handled rights
// of the running ABI and the rules granting some of them. It is computed by
// Compile in the unrestricted parent and carried to the child as data.
type Ruleset struct {
	ABI        int        `json:"abi"`
	HandledFS  uint64     `json:"handled_fs"`
	HandledNet uint64     `json:"handled_net"`
	Scoped     uint64     `json:"scoped"`
	Flags      uint32     `json:"flags"`
	Paths      []PathRule `json:"paths,omitempty"`
	Ports      []PortRule `json:"ports,omitempty"`
	// Net describes how network rules are held, for the status line:
	// "unrestricted" below ABI 4, else e.g. "tcp-ports" or
	// "tcp-bind-ports,tcp-connect-any,hosts-by-port".
	Net string `json:"net"`
	// Missing lists paths the policy names that do not exist here; they
	// grant nothing (Landlock rules attach to existing inodes).
	Missing []string `json:"missing,omitempty"`
}

// Rules is the number of Landlock rules the ruleset adds.
func (r *Ruleset) Rules() int { return len(r.Paths) + len(r.Ports) }

// Handled names the classes the ruleset restricts: "fs,net,scope" or a subset.
func (r *Ruleset) Handled() string {
	var h []string
	if r.HandledFS != 0 {
		h = append(h, "fs")
	}
	if r.HandledNet != 0 {
		h = append(h, "net")
	}
	if r.Scoped != 0 {
		h = append(h, "scope")
	}
	if len(h) == 0 {
		return "none"
	}
	return strings.Join(h, ",")
}

// FileKind says what a policy path is on this machine, as Compile needs it.
type FileKind int

// File kinds.
const (
	KindMissing FileKind = iota
	KindDir
	KindFile // anything that is not a directory
	KindSymlink
)

// StatFunc reports the kind of path; followLink says whether a final symlink
// is followed (false: KindSymlink for a symlink).
type StatFunc func(path string, followLink bool) (FileKind, error)

// Compile turns a policy into the ruleset for ABI row row. It refuses
// (ErrUnenforceable) a policy with a rule the row cannot enforce, naming each,
// a path whose rights are a strict subset of an ancestor's (Landlock
// cannot narrow beneath a grant), and any path rule
// that cannot be applied (a changeable section naming a symlink, a
// directory-only section naming a file), all at once. stat tells
// what each path is; missing paths grant nothing and are listed in Missing.
//
// Every right the row knows is handled: FS, Net and Scope of the row, so that
// whatever is not granted is refused. Two exceptions keep a rule's meaning:
// a [connect] row without a port (a loopback wildcard such as
// 127.0.0.1:*) leaves that transport's connect right unhandled, since
// Landlock filters by port only; and a host-qualified row is held by its port.
// Both are said in Net.
func Compile(p *policy.Policy, row ABIRow, logSubprocesses bool, stat StatFunc) (*Ruleset, error) {
	if p == nil {
		p = &policy.Policy{}
	}
	var problems []string
	for _, u := range CheckEnforceable(p, row) {
		problems = append(problems, u.String())
	}
	for _, n := range p.StrictSubsets() {
		problems = append(problems, n.String()+"; Landlock grants the ancestor's rights beneath it, so the narrower row misleads (policy.NormaliseHierarchy raises it)")
	}
	rs := &Ruleset{ABI: row.Version, HandledFS: row.FS, HandledNet: row.Net, Scoped: row.Scope}
	if logSubprocesses {
		if row.RestrictFlags&landlock.RestrictLogNewExecOn == 0 {
			problems = append(problems, fmt.Sprintf("--log-subprocesses needs Landlock ABI %d (LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON)", landlock.ABIAuditRecords))
		}
		rs.Flags |= landlock.RestrictLogNewExecOn
	}

	for _, path := range sortedPaths(p) {
		var access uint64
		noFollow := false
		var secs []string
		for _, s := range policy.FilesystemSections {
			if p.FS[path][s] {
				access |= SectionRights[s]
				noFollow = noFollow || changeable[s]
				secs = append(secs, "["+string(s)+"]")
			}
		}
		access &= row.FS
		if access == 0 {
			continue // e.g. only [ioctl] below ABI 5: nothing to grant
		}
		kind, err := stat(path, !noFollow)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s %s: %v", strings.Join(secs, ""), path, err))
			continue
		}
		switch kind {
		case KindMissing:
			rs.Missing = append(rs.Missing, path)
			continue
		case KindSymlink:
			problems = append(problems, fmt.Sprintf("%s %s is a symbolic link; a section that changes files must name the target itself", strings.Join(secs, ""), path))
			continue
		case KindFile:
			if access&fileRights == 0 {
				problems = append(problems, fmt.Sprintf("%s %s is not a directory, and these sections grant only directory rights", strings.Join(secs, ""), path))
				continue
			}
			access &= fileRights
		}
		rs.Paths = append(rs.Paths, PathRule{Path: path, Access: access, NoFollow: noFollow})
	}

	rs.Ports, rs.HandledNet, rs.Net = netRules(p, row)
	if len(problems) > 0 {
		return nil, &UnenforceableError{Problems: problems}
	}
	return rs, nil
}

// netRules returns the port rules, the handled network rights and the
// description of how the network rules are held.
func netRules(p *policy.Policy, row ABIRow) ([]PortRule, uint64, string) {
	if row.Net == 0 {
		return nil, 0, "unrestricted"
	}
	handled := row.Net
	grant := map[uint16]uint64{}
	hostQualified, tcpAny, udpAny := false, false, false
	udpConnect := false
	for _, c := range p.Connect {
		if c.Host != "*" {
			hostQualified = true
		}
		udp := c.Transport == policy.UDP
		if udp {
			udpConnect = true
		}
		switch {
		case c.Port == 0 && udp:
			udpAny = true
		case c.Port == 0:
			tcpAny = true
		case udp:
			grant[uint16(c.Port)] |= landlock.NetConnectSendUDP
		default:
			grant[uint16(c.Port)] |= landlock.NetConnectTCP
		}
	}
	for _, b := range p.Bind {
		if b.Transport == policy.UDP {
			grant[uint16(b.Port)] |= landlock.NetBindUDP
		} else {
			grant[uint16(b.Port)] |= landlock.NetBindTCP
		}
	}
	if udpConnect {
		// The kernel auto-binds an unbound UDP socket to an ephemeral
		// port on connect or first send; BIND_UDP gates that.
		grant[0] |= landlock.NetBindUDP
	}
	var desc []string
	if tcpAny {
		handled &^= landlock.NetConnectTCP
		desc = append(desc, "tcp-bind-ports", "tcp-connect-any")
	} else {
		desc = append(desc, "tcp-ports")
	}
	if row.Net&landlock.NetConnectSendUDP != 0 {
		if udpAny {
			handled &^= landlock.NetConnectSendUDP
			desc = append(desc, "udp-bind-ports", "udp-connect-any")
		} else {
			desc = append(desc, "udp-ports")
		}
	}
	if hostQualified {
		desc = append(desc, "hosts-by-port")
	}
	var ports []PortRule
	for port, access := range grant {
		access &= handled
		if access != 0 {
			ports = append(ports, PortRule{Port: port, Access: access})
		}
	}
	sort.Slice(ports, func(i, j int) bool { return ports[i].Port < ports[j].Port })
	return ports, handled, strings.Join(desc, ",")
}

// FSRightNames spells a filesystem access mask with the kernel's names,
// e.g. "READ_FILE|READ_DIR".
func FSRightNames(v uint64) string { return landlock.Names(landlock.ClassFS, v) }

// NetRightNames spells a network access mask, e.g. "BIND_TCP|CONNECT_TCP".
func NetRightNames(v uint64) string { return landlock.Names(landlock.ClassNet, v) }

// Describe lists the ruleset one line each: what is handled, every path and
// port rule with its rights, and the paths that grant nothing because they
// are missing. `lockstep -v run` prints it.
func (r *Ruleset) Describe() []string {
	lines := []string{
		"handled fs: " + FSRightNames(r.HandledFS),
		"handled net: " + NetRightNames(r.HandledNet),
		"scoped: " + landlock.Names(landlock.ClassScope, r.Scoped),
	}
	for _, p := range r.Paths {
		lines = append(lines, fmt.Sprintf("path %s: %s", p.Path, FSRightNames(p.Access)))
	}
	for _, p := range r.Ports {
		lines = append(lines, fmt.Sprintf("port %d: %s", p.Port, NetRightNames(p.Access)))
	}
	for _, m := range r.Missing {
		lines = append(lines, fmt.Sprintf("missing %s: does not exist here, grants nothing", m))
	}
	return lines
}
