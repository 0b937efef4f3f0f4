package main

import (
	"errors"

	"github.com/lockstep-sandbox/lockstep/internal/cli"
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
		return "", cli.Usagef("--root-digest %q: want sha256:<64 lower-case hex digits>", given)
	}
	return given, nil
}

// rootDigestExit is the exit for rootDigestFlag's error: usage for a
// malformed digest, cli.ExitFail for a root that could not be read.
func rootDigestExit(io *cli.Stdio, v *cli.Verb, err error) int {
	var u cli.UsageError
	if errors.As(err, &u) {
		return cli.UsageExit(io, v, err)
	}
	return cli.Fail(io, v.Name, cli.ExitFail, err)
}
