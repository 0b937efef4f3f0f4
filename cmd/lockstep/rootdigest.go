package main

import (
	"errors"

	"github.com/lockstep-sandbox/lockstep/internal/rootdigest"
)

// rootDigestFlag is the --root-digest of a verb running on its own root
// (--in-guest, --on-host): the digest given, checked, or when none is given
// the digest of / taken here.
func rootDigestFlag(given string) (string, error) {
	if given == "" {
		return rootdigest.Of("/")
	}
	if !rootdigest.Valid(given) {
		return "", usagef("--root-digest %q: want sha256:<64 lower-case hex digits>", given)
	}
	return given, nil
}

// rootDigestExit is the exit for rootDigestFlag's error: usage for a
// malformed digest, exitFail for a root that could not be read.
func rootDigestExit(io *stdio, v *verb, err error) int {
	var u usageError
	if errors.As(err, &u) {
		return usageExit(io, v, err)
	}
	return fail(io, v.Name, exitFail, err)
}
