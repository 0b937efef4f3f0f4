package enforcer

import (
	"fmt"
	"sort"
	"strings"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

// SectionRights maps each filesystem section to the Landlock rights it
// grants, before masking by the running ABI (reference part A.3): a right the
// ABI does not know is neither handled nor granted.
//
// MAKE_CHAR and MAKE_BLOCK belong to no section: they are always handled and
// never granted.
var SectionRights = map[policy.Section]uint64{
	policy.Read:          FSReadFile | FSReadDir | FSResolveUnix,
	policy.Execute:       FSExecute,
	policy.Write:         FSWriteFile | FSTruncate,
	policy.Create:        FSMakeReg | FSMakeDir,
	policy.CreateIPC:     FSMakeSock | FSMakeFifo,
	policy.CreateSymlink: FSMakeSym,
	policy.Delete:        FSRemoveFile | FSRemoveDir,
	policy.Restructure:   FSMakeReg | FSMakeDir | FSRemoveFile | FSRemoveDir | FSRefer,
	policy.Ioctl:         FSIoctlDev,
}

// fileRights are the rights that apply to a non-directory; a rule on a file
// keeps only these (the kernel refuses directory rights on a file).
const fileRights = FSExecute | FSWriteFile | FSReadFile | FSTruncate | FSIoctlDev | FSResolveUnix

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
//     without network rules allows anyway (as in Phobos, the shipped Java
//     base runs on older kernels).
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
		if p.FS[path][policy.Restructure] && row.FS&FSRefer == 0 {
			out = append(out, Unenforceable{Rule: "[restructure] " + path, NeedABI: ABIRefer, Why: "REFER, renaming or linking across directories"})
		}
	}
	for _, c := range p.Connect {
		rule := "[connect] " + c.String()
		switch {
		case c.Transport == policy.UDP && row.Net&NetConnectSendUDP == 0:
			out = append(out, Unenforceable{Rule: rule, NeedABI: ABIUDP, Why: "UDP port rules"})
		case c.Transport != policy.UDP && row.Net&NetConnectTCP == 0:
			out = append(out, Unenforceable{Rule: rule, NeedABI: ABINetwork, Why: "TCP port rules"})
		}
	}
	for _, b := range p.Bind {
		rule := "[bind] " + b.String()
		switch {
		case b.Transport == policy.UDP && row.Net&NetBindUDP == 0:
			out = append(out, Unenforceable{Rule: rule, NeedABI: ABIUDP, Why: "UDP port rules"})
		case b.Transport != policy.UDP && b.Port != 0 && row.Net&NetBindTCP == 0:
			out = append(out, Unenforceable{Rule: rule, NeedABI: ABINetwork, Why: "TCP port rules"})
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
// a path whose rights are a strict subset of an ancestor's (as Phobos's
// enforcer does: Landlock cannot narrow beneath a grant), and any path rule
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
		if row.RestrictFlags&RestrictLogNewExecOn == 0 {
			problems = append(problems, fmt.Sprintf("--log-subprocesses needs Landlock ABI %d (LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON)", ABILogFlags))
		}
		rs.Flags |= RestrictLogNewExecOn
	}

	for _, path := range sortedPaths(p) {
		rule, missing, problem := pathRule(p.FS[path], path, row.FS, stat)
		switch {
		case problem != "":
			problems = append(problems, problem)
		case missing:
			rs.Missing = append(rs.Missing, path)
		case rule != nil:
			rs.Paths = append(rs.Paths, *rule)
		}
	}

	rs.Ports, rs.HandledNet, rs.Net = netRules(p, row)
	if len(problems) > 0 {
		return nil, &UnenforceableError{Problems: problems}
	}
	return rs, nil
}

// pathRule compiles one path's sections into the rights handled: the rule,
// or that the path is missing, or the problem that refuses it; none of the
// three when the handled rights leave nothing to grant.
func pathRule(secs map[policy.Section]bool, path string, handled uint64, stat StatFunc) (rule *PathRule, missing bool, problem string) {
	var access uint64
	noFollow := false
	var names []string
	for _, s := range policy.FilesystemSections {
		if secs[s] {
			access |= SectionRights[s]
			noFollow = noFollow || changeable[s]
			names = append(names, "["+string(s)+"]")
		}
	}
	access &= handled
	if access == 0 {
		return nil, false, "" // e.g. only [ioctl] below ABI 5: nothing to grant
	}
	kind, err := stat(path, !noFollow)
	if err != nil {
		return nil, false, fmt.Sprintf("%s %s: %v", strings.Join(names, ""), path, err)
	}
	switch kind {
	case KindMissing:
		return nil, true, ""
	case KindSymlink:
		return nil, false, fmt.Sprintf("%s %s is a symbolic link; a section that changes files must name the target itself", strings.Join(names, ""), path)
	case KindFile:
		if access&fileRights == 0 {
			return nil, false, fmt.Sprintf("%s %s is not a directory, and these sections grant only directory rights", strings.Join(names, ""), path)
		}
		access &= fileRights
	}
	return &PathRule{Path: path, Access: access, NoFollow: noFollow}, false, ""
}

// netRules returns the port rules, the handled network rights and the
// description of how the network rules are held.
func netRules(p *policy.Policy, row ABIRow) ([]PortRule, uint64, string) {
	if row.Net == 0 {
		return nil, 0, "unrestricted"
	}
	grant, shape := portGrants(p)
	handled, desc := shape.held(row.Net)
	var ports []PortRule
	for port, access := range grant {
		access &= handled
		if access != 0 {
			ports = append(ports, PortRule{Port: port, Access: access})
		}
	}
	sort.Slice(ports, func(i, j int) bool { return ports[i].Port < ports[j].Port })
	return ports, handled, desc
}

// netShape is what of a policy's network rows decides how they are held.
type netShape struct {
	hostQualified  bool // a [connect] row names a host
	tcpAny, udpAny bool // a [connect] row of that transport has no port
}

// portGrants returns the rights each port is granted, and the rows' shape.
func portGrants(p *policy.Policy) (map[uint16]uint64, netShape) {
	grant := map[uint16]uint64{}
	var shape netShape
	udpConnect := false
	for _, c := range p.Connect {
		if c.Host != "*" {
			shape.hostQualified = true
		}
		udp := c.Transport == policy.UDP
		if udp {
			udpConnect = true
		}
		switch {
		case c.Port == 0 && udp:
			shape.udpAny = true
		case c.Port == 0:
			shape.tcpAny = true
		case udp:
			grant[uint16(c.Port)] |= NetConnectSendUDP
		default:
			grant[uint16(c.Port)] |= NetConnectTCP
		}
	}
	for _, b := range p.Bind {
		if b.Transport == policy.UDP {
			grant[uint16(b.Port)] |= NetBindUDP
		} else {
			grant[uint16(b.Port)] |= NetBindTCP
		}
	}
	if udpConnect {
		// The kernel auto-binds an unbound UDP socket to an ephemeral
		// port on connect or first send; BIND_UDP gates that.
		grant[0] |= NetBindUDP
	}
	return grant, shape
}

// held returns the network rights handled of rowNet, a connect right left
// unhandled where a row without a port needs any port, and the description
// of how the rules are held.
func (s netShape) held(rowNet uint64) (uint64, string) {
	handled := rowNet
	var desc []string
	if s.tcpAny {
		handled &^= NetConnectTCP
		desc = append(desc, "tcp-bind-ports", "tcp-connect-any")
	} else {
		desc = append(desc, "tcp-ports")
	}
	if rowNet&NetConnectSendUDP != 0 {
		if s.udpAny {
			handled &^= NetConnectSendUDP
			desc = append(desc, "udp-bind-ports", "udp-connect-any")
		} else {
			desc = append(desc, "udp-ports")
		}
	}
	if s.hostQualified {
		desc = append(desc, "hosts-by-port")
	}
	return handled, strings.Join(desc, ",")
}

var fsNames = []string{"EXECUTE", "WRITE_FILE", "READ_FILE", "READ_DIR", "REMOVE_DIR", "REMOVE_FILE", "MAKE_CHAR", "MAKE_DIR",
	"MAKE_REG", "MAKE_SOCK", "MAKE_FIFO", "MAKE_BLOCK", "MAKE_SYM", "REFER", "TRUNCATE", "IOCTL_DEV", "RESOLVE_UNIX"}

var netNames = []string{"BIND_TCP", "CONNECT_TCP", "BIND_UDP", "CONNECT_SEND_UDP"}

func bitNames(v uint64, names []string) string {
	var out []string
	for i, n := range names {
		if v&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "|")
}

// FSRightNames spells a filesystem access mask with the kernel's names,
// e.g. "READ_FILE|READ_DIR".
func FSRightNames(v uint64) string { return bitNames(v, fsNames) }

// NetRightNames spells a network access mask, e.g. "BIND_TCP|CONNECT_TCP".
func NetRightNames(v uint64) string { return bitNames(v, netNames) }

// Describe lists the ruleset one line each: what is handled, every path and
// port rule with its rights, and the paths that grant nothing because they
// are missing. `lockstep -v run` prints it.
func (r *Ruleset) Describe() []string {
	lines := []string{
		"handled fs: " + FSRightNames(r.HandledFS),
		"handled net: " + NetRightNames(r.HandledNet),
		fmt.Sprintf("scoped: %s", bitNames(r.Scoped, []string{"ABSTRACT_UNIX_SOCKET", "SIGNAL"})),
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
