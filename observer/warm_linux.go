package observer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/lockstep-sandbox/lockstep/exercise"
	"github.com/lockstep-sandbox/lockstep/observer/lane"
	"github.com/lockstep-sandbox/lockstep/observer/schedule"
)

// warmUp runs the key's first exercise once, unsandboxed, in a lane on the
// vCPU the kernel proof leaves idle (its refusal children run one at a
// time), while the proof runs; the proof's end stops it (stop). Its result
// is not used and not counted: it only does early what the first
// reference run would otherwise pay for, in a guest booted a moment ago
// and so cold: the interpreter's and the exercise's files read over 9p
// for the first time, their code translated by TCG for the first time (a
// fresh guest, measured: the fixture's first run 1.29 s, the next three
// 0.58–0.64 s). It runs only with a lane to spare; the proof's audit
// windows keep the records of their own children, and an unsandboxed run
// makes no Landlock record.
func (o *observer) warmUp(ctx context.Context) (stop func()) {
	if o.opts.Lanes < 2 {
		return func() {}
	}
	found, err := exercise.ForKey(o.opts.Exercises, o.opts.Key)
	if err != nil || len(found) == 0 {
		return func() {}
	}
	ex, err := exercise.Read(found[0])
	if err != nil || os.MkdirAll(o.work, 0o755) != nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	o.progress("%s: a warm-up run in a lane beside the kernel proof (not counted)", ex.Name)
	o.steps.Note(WarmUpStep, schedule.Started)
	copyDir := filepath.Join(o.scratch, "lanes", "1", filepath.Base(o.work))
	go func() {
		defer close(done)
		t0 := time.Now()
		_, err := ex.Run(ctx, exercise.RunOptions{WorkDir: o.work, CopyDir: copyDir, Log: o.log,
			Prefix: lane.Command([]string{o.exe}, copyDir, o.work, nil), Isolate: o.isolation(copyDir)})
		switch {
		case errors.Is(ctx.Err(), context.Canceled):
			o.log.Info("observe: the warm-up run stopped at the proof's end", "after", time.Since(t0))
		case err != nil:
			o.log.Warn("observe: the warm-up run", "err", err)
		default:
			o.log.Info("observe: the warm-up run ended", "after", time.Since(t0))
		}
	}()
	return func() {
		cancel()
		<-done
		o.steps.Note(WarmUpStep, schedule.Discarded)
	}
}
