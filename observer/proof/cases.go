package proof

import "github.com/lockstep-sandbox/lockstep/observer/audit"

// Refusal is one right class the proof refuses on purpose.
type Refusal struct {
	// Name is the check's name: the blocker without its "fs."/"net."
	// prefix, or "scope.signal".
	Name string
	// Blocker is the only blocker the record may name.
	Blocker string
}

// Refusals lists the right classes the proof refuses, one child each, in
// table order.
var Refusals = []Refusal{
	{"read_file", "fs.read_file"},
	{"read_dir", "fs.read_dir"},
	{"write_file", "fs.write_file"},
	{"truncate", "fs.truncate"},
	{"execute", "fs.execute"},
	{"make_reg", "fs.make_reg"},
	{"make_dir", "fs.make_dir"},
	{"remove_file", "fs.remove_file"},
	{"make_sym", "fs.make_sym"},
	{"refer", "fs.refer"},
	{"ioctl_dev", "fs.ioctl_dev"},
	{"bind_tcp", "net.bind_tcp"},
	{"connect_tcp", "net.connect_tcp"},
	{"bind_udp", "net.bind_udp"},
	{"connect_send_udp", "net.connect_send_udp"},
	{"scope.signal", "scope.signal"},
}

// ABI returns the Landlock ABI version that introduced the refusal's right.
func (r Refusal) ABI() int {
	b, ok := audit.LookupBlocker(r.Blocker)
	if !ok {
		panic("BUG(lockstep): refusal " + r.Name + " names unknown blocker " + r.Blocker)
	}
	return b.ABI
}

// LookupRefusal returns the refusal named name.
func LookupRefusal(name string) (Refusal, bool) {
	for _, r := range Refusals {
		if r.Name == name {
			return r, true
		}
	}
	return Refusal{}, false
}
