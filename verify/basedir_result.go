package verify

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/lockstep-sandbox/lockstep/internal/safefile"
)

// maxLegResult bounds one leg's result document.
const maxLegResult = 64 << 20

// BaseDirResult is --base-dir's --json document: one matrix per base.
type BaseDirResult struct {
	Schema  int       `json:"schema"`
	Status  int       `json:"status"`
	BaseDir string    `json:"base_dir"`
	Bases   []*Result `json:"bases"`
	// WallSeconds is the whole run: every base's cells share one pool, so
	// each base's own wall_seconds counts from the common start.
	WallSeconds float64 `json:"wall_seconds"`
}

// ReadLegResults reads every *.json under dir, each a `verify --base-dir
// --json` document (a leg's artefact), and returns their bases' results.
func ReadLegResults(dir string) ([]*Result, error) {
	var out []*Result
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".json") {
			return err
		}
		b, err := safefile.ReadFile(path, maxLegResult)
		if err != nil {
			return err
		}
		var doc BaseDirResult
		if err := json.Unmarshal(b, &doc); err != nil {
			return fmt.Errorf("%s: not a verify --base-dir --json document: %w", path, err)
		}
		if doc.Schema != ResultSchema {
			return fmt.Errorf("%s: schema %d, want %d", path, doc.Schema, ResultSchema)
		}
		out = append(out, doc.Bases...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("verify: the legs' results: %w", err)
	}
	return out, nil
}
