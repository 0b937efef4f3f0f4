package prune

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"

	"github.com/lockstep-sandbox/lockstep/enforcer/policy"
)

// builtinSeeds are the seed policies shipped with lockstep, as Phobos ships
// pruner/config/seeds in its prune image: prune.json names one by file name.
//
//go:embed seeds/*.cfg
var builtinSeeds embed.FS

// BuiltinSeeds lists the file names of the seeds shipped with lockstep.
func BuiltinSeeds() []string {
	names, _ := fs.Glob(builtinSeeds, "seeds/*.cfg")
	for i, n := range names {
		names[i] = path.Base(n)
	}
	return names
}

// readSeed parses the seed called name from dir, or from the seeds shipped
// with lockstep when dir is "".
func readSeed(dir, name string) (*policy.Policy, error) {
	if dir != "" {
		return policy.ParseFile(filepath.Join(dir, name))
	}
	src, err := builtinSeeds.ReadFile("seeds/" + name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no seed of that name is shipped with lockstep (shipped: %v); give --seeds DIR for your own", BuiltinSeeds())
	}
	if err != nil {
		return nil, err
	}
	return policy.Parse("builtin seed "+name, src)
}
