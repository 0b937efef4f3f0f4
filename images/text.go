package images

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// imageJSON is an image as `lockstep image build|path --json` prints it.
type imageJSON struct {
	Schema       int    `json:"schema_version"`
	Name         string `json:"name"`
	Root         string `json:"root"`
	RecipeKey    string `json:"recipe_key"`
	ManifestHash string `json:"manifest_sha256"`
	Packages     int    `json:"packages"`
	Cached       bool   `json:"cached"`
}

// WriteText writes the image as `lockstep image build` or `path` prints it:
// a JSON document with asJSON, else the root alone for path, the closure in
// packages.txt form for a --lock build (a summary line on warn), or a line
// naming it.
func (img *Image) WriteText(w, warn io.Writer, path, lock, asJSON bool, suite string) {
	switch {
	case asJSON:
		b, _ := json.MarshalIndent(imageJSON{Schema: 1, Name: img.Name, Root: img.Root, RecipeKey: img.RecipeKey,
			ManifestHash: img.ManifestHash, Packages: len(img.Manifest), Cached: img.Cached}, "", "  ")
		fmt.Fprintf(w, "%s\n", b)
	case path:
		fmt.Fprintln(w, img.Root)
	case lock:
		w.Write(img.Manifest.Recipe(suite))
		fmt.Fprintf(warn, "image %s: %d packages, manifest %s, root %s\n", img.Name, len(img.Manifest), img.ManifestHash, img.Root)
	default:
		state := "built"
		if img.Cached {
			state = "cached"
		}
		fmt.Fprintf(w, "%s %s %s (%s, %d packages)\n", img.Name, img.ManifestHash, img.Root, state, len(img.Manifest))
	}
}

// WriteList writes every recipe and its image in the cache, if built, as
// `lockstep image list` prints them (a JSON document with asJSON).
func WriteList(w io.Writer, opts Options, asJSON bool) {
	type row struct {
		Name      string `json:"name"`
		RecipeKey string `json:"recipe_key"`
		Built     string `json:"built_root,omitempty"`
		Manifest  string `json:"manifest_sha256,omitempty"`
		Problem   string `json:"problem,omitempty"`
	}
	var rows []row
	for _, n := range Names() {
		r, err := LoadRecipe(n)
		if err != nil {
			rows = append(rows, row{Name: n, Problem: err.Error()})
			continue
		}
		rw := row{Name: n, RecipeKey: r.Key()}
		if img, err := Lookup(r, opts); err == nil {
			rw.Built, rw.Manifest = img.Root, img.ManifestHash
		} else if !errors.Is(err, ErrNotBuilt) {
			rw.Problem = err.Error()
		}
		rows = append(rows, rw)
	}
	if asJSON {
		b, _ := json.MarshalIndent(struct {
			Schema int   `json:"schema_version"`
			Images []row `json:"images"`
		}{1, rows}, "", "  ")
		fmt.Fprintf(w, "%s\n", b)
		return
	}
	for _, rw := range rows {
		switch {
		case rw.Problem != "":
			fmt.Fprintf(w, "%-10s %.16s  refused: %s\n", rw.Name, rw.RecipeKey, rw.Problem)
		case rw.Built != "":
			fmt.Fprintf(w, "%-10s %.16s  %s  %s\n", rw.Name, rw.RecipeKey, rw.Manifest, rw.Built)
		default:
			fmt.Fprintf(w, "%-10s %.16s  not built\n", rw.Name, rw.RecipeKey)
		}
	}
}
