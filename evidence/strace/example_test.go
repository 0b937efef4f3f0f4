package strace_test

import (
	"fmt"
	"strings"

	"github.com/lockstep-sandbox/lockstep/evidence/strace"
)

// Parse a trace: the halves of the clone are joined, and the child the
// restricted thread creates is inside its Landlock domain.
func ExampleParser() {
	const trace = `100 landlock_restrict_self(3<anon_inode:[landlock-ruleset]>, 0) = 0
100 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD <unfinished ...>
101 openat(AT_FDCWD</work>, "/etc/shadow", O_RDONLY) = -1 EACCES (Permission denied)
100 <... clone resumed>, child_tidptr=0x7f0) = 101
101 +++ exited with 1 +++
`
	p := strace.NewParser(strings.NewReader(trace))
	for c, err := range p.All() {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%d %s %s in-domain=%v\n", c.PID, c.Kind, c.Name, c.InDomain)
		if c.Name == "openat" {
			path, _ := c.Args[1].Str()
			dir, _ := c.Args[0].FD()
			fmt.Printf("  %s relative to %s: %s\n", path, dir.Path, c.Errno)
		}
	}
	// Output:
	// 100 syscall landlock_restrict_self in-domain=false
	// 100 syscall clone in-domain=true
	// 101 syscall openat in-domain=true
	//   /etc/shadow relative to /work: EACCES
	// 101 exit  in-domain=true
}
