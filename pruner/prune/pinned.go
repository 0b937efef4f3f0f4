package prune

import (
	"fmt"
	"strings"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/pruner/readroot"
	"github.com/lockstep-sandbox/lockstep/pruner/search"
)

// pinnedRoot is one of prune.json's pinned_read_roots with its manifest.
type pinnedRoot struct {
	Path     string `json:"path"`
	Manifest string `json:"manifest"`
	m        readroot.Manifest
}

// loadPinned reads the manifest of every pinned read root from the seed
// directory. A manifest that is missing or does not parse aborts.
func (s *state) loadPinned() error {
	for _, r := range s.ex.Config.PinnedReadRoots {
		data, err := readSeedFile(s.opts.SeedDir, r.Manifest)
		if err != nil {
			return &search.AbortError{Reason: fmt.Sprintf("pinned read root %s: manifest %s: %v", r.Path, r.Manifest, err)}
		}
		m, err := readroot.ParseManifest(data)
		if err != nil {
			return &search.AbortError{Reason: fmt.Sprintf("pinned read root %s: manifest %s: %v", r.Path, r.Manifest, err)}
		}
		s.pinned = append(s.pinned, pinnedRoot{Path: r.Path, Manifest: r.Manifest, m: m})
	}
	return nil
}

// verifyPinned re-hashes every pinned read root against its manifest; a
// file that does not match aborts the prune, naming the file.
func (s *state) verifyPinned(when string) error {
	if len(s.pinned) == 0 {
		return nil
	}
	type verified struct {
		pinnedRoot
		readroot.Summary
	}
	var out []verified
	for _, r := range s.pinned {
		sum, err := readroot.Verify(r.Path, r.m)
		if err != nil {
			return &search.AbortError{Reason: fmt.Sprintf("%s: %v", when, err)}
		}
		out = append(out, verified{r, sum})
	}
	s.entry("pinned read roots", map[string]any{"when": when, "roots": out})
	return nil
}

// pinnedPaths are the pinned read roots' paths.
func (s *state) pinnedPaths() []string {
	var out []string
	for _, r := range s.pinned {
		out = append(out, r.Path)
	}
	return out
}

// checkPinnedWrites aborts when p holds a write-class right on a pinned
// read root, beneath one or on an ancestor of one: the manifest vouches
// for the tree only while nothing the build runs can change it.
func (s *state) checkPinnedWrites(what string, p *policy.Policy) error {
	var bad []string
	for _, it := range search.Items(p) {
		if it.Path == "" || !policy.IsWriteClass(it.Section) {
			continue
		}
		for _, r := range s.pinned {
			if it.Path == r.Path || policy.Beneath(it.Path, r.Path) || policy.Beneath(r.Path, it.Path) {
				bad = append(bad, fmt.Sprintf("%s reaches the pinned read root %s", it, r.Path))
			}
		}
	}
	if len(bad) > 0 {
		return &search.AbortError{Reason: what + ": " + strings.Join(bad, "; ")}
	}
	return nil
}
