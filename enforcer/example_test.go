package enforcer_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lockstep-sandbox/lockstep/landlock"

	"github.com/lockstep-sandbox/lockstep/enforcer"
	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

// What a kernel with Landlock ABI 7 cannot enforce, without asking it.
func ExampleCheckEnforceable() {
	p, _ := policy.Parse("ex.cfg", []byte("[bind]\nallow 0\nallow 5353 udp\n[connect]\nallow 127.0.0.1:5432\n"))
	for _, u := range enforcer.CheckEnforceable(p, landlock.ABITable[7]) {
		fmt.Println(u)
	}
	// Output:
	// [bind] allow 5353 udp needs Landlock ABI 10 (UDP port rules)
}

// Run a real command under a policy on this kernel: the granted file is read,
// the other one is refused.
func ExampleRun() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "granted"), []byte("hello\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "secret"), []byte("no\n"), 0o644)
	p, _ := policy.Parse("ex.cfg", []byte("[read]\n/usr\n/etc/ld.so.cache\n"+filepath.Join(dir, "granted")+"\n[execute]\n/usr\n"))
	for _, f := range []string{"granted", "secret"} {
		status, err := enforcer.Run(context.Background(), enforcer.Options{
			Policy:  p,
			Command: []string{"/usr/bin/cat", filepath.Join(dir, f)},
			Stdout:  os.Stdout,
			Stderr:  nil, // the status line and cat's "Permission denied" go to os.Stderr
			Quiet:   true,
		})
		fmt.Println(f, status, err)
	}
	// Output:
	// hello
	// granted 0 <nil>
	// secret 1 <nil>
}
