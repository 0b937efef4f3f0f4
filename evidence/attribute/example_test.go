package attribute_test

import (
	"fmt"
	"strings"

	"github.com/lockstep-sandbox/lockstep/evidence/attribute"
	"github.com/lockstep-sandbox/lockstep/evidence/strace"
)

// Attribute the refusals of a trace: a create is charged to the parent
// directory, a bind to its port and transport, and EPERM is never a grant.
func ExampleRefusals() {
	const trace = `7 landlock_restrict_self(3<anon_inode:[landlock-ruleset]>, 0) = 0
7 mkdir("/work/build", 0777) = -1 EACCES (Permission denied)
7 socket(AF_INET, SOCK_STREAM|SOCK_CLOEXEC, IPPROTO_IP) = 4<socket:[99]>
7 bind(4<socket:[99]>, {sa_family=AF_INET, sin_port=htons(8080), sin_addr=inet_addr("127.0.0.1")}, 16) = -1 EACCES (Permission denied)
7 setsid() = -1 EPERM (Operation not permitted)
`
	var calls []*strace.Call
	for c, err := range strace.NewParser(strings.NewReader(trace)).All() {
		if err != nil {
			panic(err)
		}
		calls = append(calls, c)
	}
	for _, r := range attribute.Refusals(calls, attribute.Options{}) {
		fmt.Println(r.Layer, r.Op, r.Paths, r.Sections, r.Rights, r.Port, "["+r.Transport+"]")
	}
	// Output:
	// filesystem create [/work] [create] [fs.make_dir] -1 []
	// network bind [] [bind] [net.bind_tcp] 8080 [tcp]
	// fixed setsid [] [] [] -1 []
}
