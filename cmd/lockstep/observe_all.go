package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lockstep-sandbox/lockstep/exercise"
	"github.com/lockstep-sandbox/lockstep/observer"
	"github.com/lockstep-sandbox/lockstep/verify"
)

// allKeys is the --key value that observes every key of the exercise tree;
// no exercise's key may be named so.
const allKeys = "all"

// exerciseKeys are the distinct keys of the exercises under root, sorted.
func exerciseKeys(root string) ([]string, error) {
	keys, err := exercise.Keys(root)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("no exercise under %s", root)
	}
	if slices.Contains(keys, allKeys) {
		return nil, fmt.Errorf("an exercise under %s has the key %q, which --key %s cannot tell from every key", root, allKeys, allKeys)
	}
	return keys, nil
}

// eachKey runs one for each of keys in order (a line `key K: …` first,
// from head), prints the summary line and returns the worst status. An
// interruption stops it; a key it leaves unvisited makes the status at
// least indeterminate (3), even when the key interrupted ended well.
func eachKey(ctx context.Context, io *stdio, verb string, keys []string, head func(k string) string, one func(k string) int) int {
	status := exitOK
	for i, k := range keys {
		fmt.Fprintf(io.out, "key %s: %s\n", k, head(k))
		status = verify.WorseStatus(status, one(k))
		if ctx.Err() != nil {
			if left := keys[i+1:]; len(left) > 0 {
				fmt.Fprintf(io.err, "lockstep %s: interrupted after key %s; not run: %s\n", verb, k, strings.Join(left, ", "))
				status = verify.WorseStatus(status, exitIndeterminate)
			}
			break
		}
	}
	fmt.Fprintf(io.out, "every key (%s): status %d\n", strings.Join(keys, ", "), status)
	return status
}

// keyedReport is the HTML report's file for one key of --key all: the
// key before the extension ("" stays "").
func keyedReport(html, key string) string {
	if html == "" {
		return ""
	}
	ext := filepath.Ext(html)
	return strings.TrimSuffix(html, ext) + "-" + key + ext
}

// observeAll observes every key of the exercise tree, one guest each, in
// key order. Each key reads and writes its own path set directory,
// <path-sets>/<key>, so its run.json, observe.json and artefacts stay
// apart, and its report names the key; one key's failure does not stop
// the others. A key without its directory is indeterminate (nothing was
// observed).
func observeAll(ctx context.Context, io *stdio, kernelArg, html string, opts observer.HostOptions) int {
	keys, err := exerciseKeys(opts.Exercises)
	if err != nil {
		return fail(io, "observe", exitIndeterminate, err)
	}
	return eachKey(ctx, io, "observe", keys, func(k string) string { return "path set " + filepath.Join(opts.PathSets, k) }, func(k string) int {
		o := opts
		o.Key, o.PathSets = k, filepath.Join(opts.PathSets, k)
		if fi, err := os.Stat(o.PathSets); err != nil || !fi.IsDir() {
			fmt.Fprintf(io.err, "lockstep observe: key %s: %s is not a directory; want the key's path set there\n", k, o.PathSets)
			return exitIndeterminate
		}
		return observeHost(ctx, io, kernelArg, keyedReport(html, k), o)
	})
}
