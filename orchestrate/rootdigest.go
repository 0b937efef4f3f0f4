package orchestrate

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

// noRoot is how a problem names the root of a record without
// provenance.root_digest.
const noRoot = "none"

// UnknownRoot is a pair of records merged although one has no
// provenance.root_digest (Options.AllowUnknownRoot): the roots of the prune
// and of the observation were not compared.
type UnknownRoot struct {
	// Exercise is the stem, <lang>_<ex>.
	Exercise string `json:"exercise"`
	// Record is the record without a root digest; Beside is the record it
	// was merged with, and BesideRoot that one's root digest.
	Record     string `json:"record"`
	Beside     string `json:"beside"`
	BesideRoot string `json:"beside_root"`
}

// checkRootDigests refuses every ABI-10 record observed on another root
// file system than its exercise's policy was pruned on: their
// provenance.root_digest must be equal (both absent counts as equal, for
// records made before the digest was recorded). A policy pruned in one root
// grants that root's paths; rows observed in another say nothing about it.
// When only one of the two has a digest (Phobos's container prune writes
// none), the pair is refused unless allowUnknown, and then returned: the
// summary and the tree name it. abiDirs are the directories holding the
// .abi10.json records (the KVM directories, or the path directory when none
// is given).
func checkRootDigests(langs []string, pathDir string, abiDirs []string, allowUnknown bool, probs *problems) []UnknownRoot {
	unknown := []UnknownRoot{}
	for _, dir := range abiDirs {
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue // listDir has said so
		}
		var stems []string
		for _, e := range ents {
			if s, ok := strings.CutSuffix(e.Name(), abi10JSON); ok && hasLangPrefix(s, langs) {
				stems = append(stems, s)
			}
		}
		sort.Strings(stems)
		for _, stem := range stems {
			if u := checkRootDigest(stem, pathDir, dir, allowUnknown, probs); u != nil {
				unknown = append(unknown, *u)
			}
		}
	}
	return unknown
}

func checkRootDigest(stem, pathDir, abiDir string, allowUnknown bool, probs *problems) *UnknownRoot {
	kvmPath, prunedPath := filepath.Join(abiDir, stem+abi10JSON), filepath.Join(pathDir, stem+".json")
	kvm, err := readRecord(kvmPath, &kvmFields{})
	if err != nil {
		return nil // checkABI10 says why
	}
	pruned, err := readRecord(prunedPath, &layerFields{})
	if err != nil {
		return nil // checkExercise says why
	}
	observed, prunedOn := rootDigestOf(kvm), rootDigestOf(pruned)
	if observed == prunedOn {
		return nil
	}
	unknown := observed == noRoot || prunedOn == noRoot
	if unknown && allowUnknown {
		if prunedOn == noRoot {
			return &UnknownRoot{Exercise: stem, Record: prunedPath, Beside: kvmPath, BesideRoot: observed}
		}
		return &UnknownRoot{Exercise: stem, Record: kvmPath, Beside: prunedPath, BesideRoot: prunedOn}
	}
	hint := ""
	if unknown {
		hint = "; --allow-unknown-root merges a record without a root digest (Phobos's container prune writes none) and names it in the summary and the tree"
	}
	probs.add("%s: root digests differ: %s was observed on root %s, and %s.json was pruned on root %s; "+
		"a sidecar is merged only with the policy pruned on the same root file system%s",
		stem, kvmPath, observed, stem, prunedOn, hint)
	return nil
}

// rootDigestOf is a record's provenance.root_digest, noRoot when it has none.
func rootDigestOf(rec map[string]any) string {
	prov, _ := rec["provenance"].(map[string]any)
	if d, ok := prov["root_digest"].(string); ok && d != "" {
		return d
	}
	return noRoot
}

// markUnknownRoots heads the tree's files that rest on a pair of records of
// unknown root with comment lines naming the records: the exercise's
// exercises/<stem>.cfg and .abi10.cfg, and its language's Abi10-<lang>.cfg.
// A comment changes no grant.
func markUnknownRoots(files []output, unknown []UnknownRoot) {
	notes := map[string][]string{}
	for _, u := range unknown {
		line := fmt.Sprintf("%s was merged with --allow-unknown-root: %s has no provenance.root_digest, so its root and that of %s (%s) were not compared.",
			u.Exercise, u.Record, u.Beside, u.BesideRoot)
		lang, _, _ := strings.Cut(u.Exercise, "_")
		for _, p := range []string{"exercises/" + u.Exercise + ".cfg", "exercises/" + u.Exercise + abi10CFG, "Abi10-" + lang + ".cfg"} {
			notes[p] = append(notes[p], line)
		}
	}
	for i, f := range files {
		lines := notes[f.path]
		if len(lines) == 0 {
			continue
		}
		head := (&policy.Policy{Header: lines}).Render()
		if len(f.data) > 0 {
			head = append(head, '\n')
		}
		files[i].data = append(head, bytes.Clone(f.data)...)
	}
}

func hasLangPrefix(stem string, langs []string) bool {
	for _, l := range langs {
		if strings.HasPrefix(stem, l+"_") {
			return true
		}
	}
	return false
}

// abiDirs are the directories whose .abi10.json records the merge reads.
func abiDirs(o Options) []string {
	if len(o.KVMDirs) > 0 {
		return o.KVMDirs
	}
	return []string{o.PathDir}
}
