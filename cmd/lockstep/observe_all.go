package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/lockstep-sandbox/lockstep/exercise"
	"github.com/lockstep-sandbox/lockstep/internal/cli"
	"github.com/lockstep-sandbox/lockstep/observer"
	"github.com/lockstep-sandbox/lockstep/report"
	"github.com/lockstep-sandbox/lockstep/verify"
)

// allKeys is the --key value that observes every key of the exercise tree;
// no exercise's key may be named so.
const allKeys = "all"

// eachKey runs one for each of keys in order (a line `key K: …` first,
// from head), prints the summary line and returns the worst status. An
// interruption stops it; a key it leaves unvisited makes the status at
// least indeterminate (3), even when the key interrupted ended well.
func eachKey(ctx context.Context, io *cli.Stdio, verb string, keys []string, head func(k string) string, one func(k string) int) int {
	status := cli.ExitOK
	for i, k := range keys {
		fmt.Fprintf(io.Out, "key %s: %s\n", k, head(k))
		status = verify.WorseStatus(status, one(k))
		if ctx.Err() != nil {
			if left := keys[i+1:]; len(left) > 0 {
				fmt.Fprintf(io.Err, "lockstep %s: interrupted after key %s; not run: %s\n", verb, k, strings.Join(left, ", "))
				status = verify.WorseStatus(status, cli.ExitIndeterminate)
			}
			break
		}
	}
	fmt.Fprintf(io.Out, "every key (%s): status %d\n", strings.Join(keys, ", "), status)
	return status
}

// observeAll observes every key of the exercise tree, one guest each, in
// key order. Each key reads and writes its own path set directory,
// <path-sets>/<key>, so its run.json, observe.json and artefacts stay
// apart, and its report names the key; one key's failure does not stop
// the others. A key without its directory is indeterminate (nothing was
// observed).
func observeAll(ctx context.Context, io *cli.Stdio, kernelArg, html string, opts observer.HostOptions) int {
	keys, err := exercise.EveryKey(opts.Exercises, allKeys)
	if err != nil {
		return cli.Fail(io, "observe", cli.ExitIndeterminate, err)
	}
	return eachKey(ctx, io, "observe", keys, func(k string) string { return "path set " + filepath.Join(opts.PathSets, k) }, func(k string) int {
		o := opts
		o.Key, o.PathSets = k, filepath.Join(opts.PathSets, k)
		if fi, err := os.Stat(o.PathSets); err != nil || !fi.IsDir() {
			fmt.Fprintf(io.Err, "lockstep observe: key %s: %s is not a directory; want the key's path set there\n", k, o.PathSets)
			return cli.ExitIndeterminate
		}
		return observeHost(ctx, io, kernelArg, report.KeyedFile(html, k), o)
	})
}
