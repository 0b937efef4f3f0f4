package harness

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/guest/proto"
)

func TestJudge(t *testing.T) {
	const sum = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	good := func() outcome {
		return outcome{
			console:       []byte("[ 1.0] boot\r\nLOCKSTEP-STATUS 7\r\n[ 1.1] reboot: Restarting system\r\n"),
			done:          &proto.Done{Status: 7, ResultsSHA256: sum, ResultsBytes: 4},
			resultsSHA256: sum, resultsBytes: 4,
		}
	}
	for _, tc := range []struct {
		Name    string
		Modify  func(*outcome)
		Status  int    // the command's status when trustworthy
		Setup   bool   // status 70
		Problem string // "" when trustworthy; else a part of one problem
	}{
		{Name: "all agree", Status: 7},
		{Name: "no status line", Modify: func(o *outcome) { o.console = []byte("Kernel panic - not syncing\n") }, Problem: "no LOCKSTEP-STATUS"},
		{Name: "missing done", Modify: func(o *outcome) { o.done = nil; o.events = fmt.Errorf("%w (3 events read)", proto.ErrMissingDone) }, Problem: "without a done event"},
		{Name: "no done and no error", Modify: func(o *outcome) { o.done = nil }, Problem: "no done event"},
		{Name: "sequence gap", Modify: func(o *outcome) { o.events = fmt.Errorf("%w: got seq 5, wanted 4", proto.ErrSeqGap) }, Problem: "sequence gap"},
		{Name: "bad checksum", Modify: func(o *outcome) { o.results = fmt.Errorf("%w: header says …", proto.ErrBadChecksum) }, Problem: "checksum mismatch"},
		{Name: "frame differs from done", Modify: func(o *outcome) { o.resultsSHA256 = strings.Repeat("0", 64) }, Problem: "differs from the done event's"},
		{Name: "frame length differs", Modify: func(o *outcome) { o.resultsBytes = 5 }, Problem: "differs from the done event's"},
		{Name: "console and done disagree", Modify: func(o *outcome) { o.done.Status = 0 }, Problem: "console status 7 differs"},
		{Name: "deadline passed", Modify: func(o *outcome) { o.deadline = "the job phase passed its 5s deadline" }, Problem: "job phase passed"},
		{Name: "setup failure", Modify: func(o *outcome) {
			o.console = []byte("LOCKSTEP-ERROR mount 9p root (tag lockstep.root): no such device\nLOCKSTEP-STATUS 70\n")
			o.done, o.events = nil, errors.New("whatever")
		}, Setup: true, Problem: "mount 9p root"},
		{Name: "setup failure reason from the event", Modify: func(o *outcome) {
			o.console = []byte("LOCKSTEP-STATUS 70\n")
			o.guestError = "virtio-serial ports not found"
		}, Setup: true, Problem: "virtio-serial ports not found"},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			o := good()
			if tc.Modify != nil {
				tc.Modify(&o)
			}
			v := judge(o)
			switch {
			case tc.Setup:
				if !v.setup || !strings.Contains(v.reason, tc.Problem) {
					t.Errorf("judge = %+v, want a setup failure naming %q", v, tc.Problem)
				}
			case tc.Problem == "":
				if v.setup || len(v.problems) > 0 || v.status != tc.Status {
					t.Errorf("judge = %+v, want status %d and no problems", v, tc.Status)
				}
			default:
				if v.setup || !strings.Contains(strings.Join(v.problems, "; "), tc.Problem) {
					t.Errorf("judge = %+v, want a problem naming %q", v, tc.Problem)
				}
			}
		})
	}
}
