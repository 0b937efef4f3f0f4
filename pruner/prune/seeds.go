package prune

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
	"github.com/lockstep-sandbox/lockstep/internal/safefile"
)

// builtinSeeds are the seed policies shipped with lockstep: prune.json
// names one by file name (seed, kept_seed). The manifests of pinned read roots live beside them.
//
//go:embed seeds/*.cfg seeds/*.sha256
var builtinSeeds embed.FS

// BuiltinSeeds lists the file names of the seeds shipped with lockstep.
func BuiltinSeeds() []string {
	names, _ := fs.Glob(builtinSeeds, "seeds/*.cfg")
	for i, n := range names {
		names[i] = path.Base(n)
	}
	return names
}

// maxSeedFile bounds a file read from the seed directory (a manifest of a
// large tree is the largest).
const maxSeedFile = 64 << 20

// readSeedFile reads the file called name from dir, or from the files
// shipped with lockstep when dir is "".
func readSeedFile(dir, name string) ([]byte, error) {
	if dir != "" {
		return safefile.ReadFile(filepath.Join(dir, name), maxSeedFile)
	}
	src, err := builtinSeeds.ReadFile("seeds/" + name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no file of that name is shipped with lockstep (seeds: %v); give --seeds DIR for your own", BuiltinSeeds())
	}
	return src, err
}

// readSeed parses the seed called name from dir, or from the seeds shipped
// with lockstep when dir is "".
func readSeed(dir, name string) (*policy.Policy, error) {
	if dir != "" {
		return policy.ParseFile(filepath.Join(dir, name))
	}
	src, err := readSeedFile(dir, name)
	if err != nil {
		return nil, err
	}
	return policy.Parse("builtin seed "+name, src)
}
