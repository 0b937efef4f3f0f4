package exercise_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/lockstep-sandbox/lockstep/exercise"
)

// Discover the reference exercises of one key, check the contract, and run
// one unsandboxed in a scratch working directory.
func ExampleExercise_Run() {
	found, err := exercise.ForKey("../testdata/exercises", "generic")
	if err != nil {
		log.Fatal(err)
	}
	e, err := exercise.Read(found[0])
	if err != nil {
		log.Fatal(err)
	}
	scratch, err := os.MkdirTemp("", "exercise-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(scratch)
	res, err := e.Run(context.Background(), exercise.RunOptions{WorkDir: filepath.Join(scratch, "testing-dir")})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(e.Stem(), res.Status, res.Verdict.ExitClass, len(res.Verdict.Tests), "tests")
	fmt.Println("usable as a reference:", res.Verdict.ReferenceProblem() == nil)
	// Output:
	// generic_shell-reference 0 success 6 tests
	// usable as a reference: true
}
