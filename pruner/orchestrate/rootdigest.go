package orchestrate

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// checkRootDigests refuses every ABI-10 record observed on another root
// file system than its exercise's policy was pruned on: their
// provenance.root_digest must be equal (both absent counts as equal, for
// records made before the digest was recorded). A policy pruned in one root
// grants that root's paths; rows observed in another say nothing about it.
// abiDirs are the directories holding the .abi10.json records (the KVM
// directories, or the path directory when none is given).
func checkRootDigests(langs []string, pathDir string, abiDirs []string, probs *problems) {
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
			checkRootDigest(stem, pathDir, dir, probs)
		}
	}
}

func checkRootDigest(stem, pathDir, abiDir string, probs *problems) {
	kvm, err := readRecord(filepath.Join(abiDir, stem+abi10JSON), &kvmFields{})
	if err != nil {
		return // checkABI10 says why
	}
	pruned, err := readRecord(filepath.Join(pathDir, stem+".json"), &layerFields{})
	if err != nil {
		return // checkExercise says why
	}
	observed, prunedOn := rootDigestOf(kvm), rootDigestOf(pruned)
	if observed == prunedOn {
		return
	}
	probs.add("%s: root digests differ: %s was observed on root %s, and %s.json was pruned on root %s; "+
		"a sidecar is merged only with the policy pruned on the same root file system",
		stem, filepath.Join(abiDir, stem+abi10JSON), observed, stem, prunedOn)
}

// rootDigestOf is a record's provenance.root_digest, "none" when it has none.
func rootDigestOf(rec map[string]any) string {
	prov, _ := rec["provenance"].(map[string]any)
	if d, ok := prov["root_digest"].(string); ok && d != "" {
		return d
	}
	return "none"
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
