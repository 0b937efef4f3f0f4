package prune_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/lockstep-sandbox/lockstep/exercise"
	"github.com/lockstep-sandbox/lockstep/pruner/prune"
	"github.com/lockstep-sandbox/lockstep/pruner/search"
)

// A program that prunes calls ServeRoles first thing in main. Prune starts
// the program again as its enforcer and its containment probe; ServeRoles
// plays that role and exits, so no lockstep CLI need be installed. When the
// program was started by anyone else, ServeRoles returns at once.
func ExampleServeRoles() {
	prune.ServeRoles()
	// Flags, then prune.Prune with prune.Options{} (the default
	// Enforcer and ContainOptions.Probe are this program).
}

// Prune a tiny exercise whose build script reads a file and writes one
// JUnit report, on this host's Landlock (LOCKSTEP_DISPOSABLE=1: the pruner
// owns the scratch directories it is given). The enforcer is the program
// itself, here the test binary, whose TestMain calls prune.ServeRoles.
// Limits and containment are left out to keep the example short; lockstep
// prune runs every stage.
func ExamplePrune() {
	tmp, _ := os.MkdirTemp("", "prune-example-")
	defer os.RemoveAll(tmp)
	// The exercise: tiny/reads-data/{build_script.sh,data.txt,test-reports/}.
	dir := filepath.Join(tmp, "exercises", "tiny", "reads-data")
	os.MkdirAll(filepath.Join(dir, "test-reports"), 0o755)
	os.WriteFile(filepath.Join(dir, "data.txt"), []byte("42\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "build_script.sh"), []byte(`#!/bin/bash
read -r x <data.txt
[[ $x == 42 ]] && outcome="" || outcome="<failure/>"
printf '<testsuite name="tiny"><testcase classname="tiny" name="reads_data">%s</testcase></testsuite>\n' "$outcome" >test-reports/tiny.xml
`), 0o755)
	ex, err := exercise.ReadDir(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	os.Setenv("LOCKSTEP_DISPOSABLE", "1")
	work := filepath.Join(tmp, "testing-dir")
	res, err := prune.Prune(context.Background(), ex, prune.Options{
		WorkDir:    work,
		SkipLimits: true, SkipContainment: true,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if res.Aborted != nil {
		fmt.Println("aborted:", res.Aborted.Aborted)
		return
	}
	// The grants inside the working directory (the rest, bash and its
	// libraries, depends on the machine).
	for _, it := range search.Items(res.Policy) {
		if strings.HasPrefix(it.Path, work) {
			fmt.Println(strings.Replace(it.String(), work, "WORK", 1))
		}
	}
	paths, _ := res.Write(tmp)
	fmt.Println(len(paths), "files:", filepath.Base(paths[0]), filepath.Base(paths[1]))
	// Output:
	// [read] WORK
	// [write] WORK/test-reports
	// [create] WORK/test-reports
	// 2 files: tiny_reads-data.cfg tiny_reads-data.json
}
