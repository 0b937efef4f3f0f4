package observer

import (
	"fmt"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/landlock"
	"github.com/lockstep-sandbox/lockstep/observer/audit"
	"github.com/lockstep-sandbox/lockstep/observer/engine"
	"github.com/lockstep-sandbox/lockstep/observer/kvmrecord"
)

// Difference is what a diagnosis run of the ABI-10 phase found that the
// policy lacks: strace's network rules (confirmed by the control replay)
// and, as evidence only, every other refusal confirmed as Landlock's.
type Difference struct {
	// Bind and Connect are the network rules strace derived, as policy rows
	// ("allow 5000 udp", "allow 127.0.0.1:80 tcp").
	Bind, Connect []string
	// Other lists every other refusal confirmed as Landlock's (a filesystem
	// or limit difference), one line each.
	Other []string
}

// Rows applies the row rule (docs/observe.md): a bind rule strace derived
// becomes a row only if it is "allow <port> udp", the policy
// does not hold it already, and a net.bind_udp record of the run names the
// port (a record without a port counts as port 0). Every other bind rule goes
// to other. Each row carries every net.bind_udp record of the run.
func Rows(bind []string, denials []audit.Denial, held []policy.BindRule) (rows []kvmrecord.Row, ports []int, other []string) {
	refused := map[int]bool{}
	var lines []string
	for i := range denials {
		a := &denials[i].Access
		if !a.HasBlocker(string(landlock.BindUDP)) {
			continue
		}
		refused[engine.NetPort(a, policy.Bind)] = true
		lines = append(lines, denials[i].Record.String())
	}
	for _, rule := range bind {
		port, ok := policy.UDPBindRow(rule)
		if !ok || port > 65535 || !refused[port] {
			other = append(other, rule)
			continue
		}
		if holds(held, port) {
			continue
		}
		rows = append(rows, kvmrecord.Row{Rule: rule, Audit: append([]string{}, lines...)})
		ports = append(ports, port)
	}
	return rows, ports, other
}

func holds(held []policy.BindRule, port int) bool {
	for _, b := range held {
		if b.Port == port && b.Transport == policy.UDP {
			return true
		}
	}
	return false
}

// bindRule renders a bind as the row a policy would carry.
func bindRule(port int, t policy.Transport) string {
	return fmt.Sprintf("allow %d %s", port, t)
}
