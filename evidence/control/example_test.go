package control_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/evidence/attribute"
	"github.com/lockstep-sandbox/lockstep/evidence/control"
)

// Replay two refused execs outside the sandbox: only the one whose file can
// be executed here can have been refused by Landlock.
func ExampleReplay() {
	dir, err := os.MkdirTemp("", "control-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	for name, mode := range map[string]os.FileMode{"tool": 0o755, "notes": 0o644} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), mode); err != nil {
			panic(err)
		}
	}
	for _, name := range []string{"tool", "notes"} {
		r := &attribute.Refusal{Layer: attribute.Filesystem, Op: "execute"}
		r.Add(attribute.Need{Path: filepath.Join(dir, name), Sections: []policy.Section{policy.Execute, policy.Read}})
		v := control.Replay(r, control.Options{})
		fmt.Printf("%s: landlock=%v\n", name, v.Landlock)
	}
	// Output:
	// tool: landlock=true
	// notes: landlock=false
}
