package verdict_test

import (
	"fmt"

	"github.com/lockstep-sandbox/lockstep/evidence/verdict"
)

// A pytest run that collected nothing: status 5, a report without tests.
func ExampleJudge() {
	v := verdict.Judge(verdict.Run{
		Status: 5,
		Log:    []byte("collecting ... collected 0 items\n============================ no tests ran in 0.00s =============================\n"),
		Reports: []verdict.Report{{Path: "test-reports/pytest.xml",
			Data: []byte(`<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="0"/></testsuites>`)}},
	})
	fmt.Println(v.ExitClass, v.TestsRan, v.NoSource)
	fmt.Println(v.ReferenceProblem())
	// Output:
	// failure false true
	// the reference run ran no tests: the log says "============================ no tests ran in 0.00s ============================="
}
