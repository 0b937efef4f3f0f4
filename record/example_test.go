package record_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/record"
)

// Write a policy and the record that vouches for it, then read the record
// back and check it against the file beside it.
func ExampleWriteExercise() {
	out, err := os.MkdirTemp("", "record-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(out)

	prov := record.Provenance{Pruner: record.PrunerName, Kernel: "7.2.13", Architecture: "x86_64",
		LandlockABI: 10, UID: 0, Strace: "strace -- version 6.1", Date: "2026-11-29T08:44:42Z"}
	p, err := policy.Parse("p.cfg", []byte("[read]\n/usr\n[execute]\n/usr/bin\n"))
	if err != nil {
		log.Fatal(err)
	}
	p.Header = record.CfgHeader("generic", "shell-reference", record.StageAll, prov)
	cfg := p.Render()
	if err := os.WriteFile(filepath.Join(out, "generic_shell-reference.cfg"), cfg, 0o644); err != nil {
		log.Fatal(err)
	}
	path, err := record.WriteExercise(out, &record.Exercise{
		SchemaVersion: record.ExerciseSchema, Key: "generic", Exercise: "shell-reference", Stage: record.StageAll,
		Provenance: prov, CfgSHA256: record.SHA256Hex(cfg), Policy: record.FromPolicy(p, nil),
		Log: []record.Entry{record.MustEntry("grow", map[string]any{"rounds": 2})},
	})
	if err != nil {
		log.Fatal(err)
	}
	r, err := record.ReadExercise(path)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(filepath.Base(path), r.Policy.FS["/usr/bin"], r.Vouches(cfg))
	// Output: generic_shell-reference.json [execute] <nil>
}
