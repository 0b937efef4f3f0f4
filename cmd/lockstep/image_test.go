package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/internal/cli"
)

func runImage(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(t.Context(), append([]string{"image"}, args...), &cli.Stdio{Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

// TestImageVerb drives `lockstep image` as users meet it: usage errors exit
// 2 with the usage line, path of an image not built exits 1 with the command
// that builds it, list prints every recipe (JSON with --json).
func TestImageVerb(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	for _, args := range [][]string{{}, {"frob"}, {"build"}, {"path", "a", "b"}, {"path", "no-such-image"}, {"list", "x"}, {"build", "--bogus", "generic"}} {
		code, _, errs := runImage(t, args...)
		if code != cli.ExitUsage || !strings.Contains(errs, "usage: lockstep image") {
			t.Errorf("image %q = %d, stderr %q; want exit 2 with the usage line", args, code, errs)
		}
	}
	code, out, errs := runImage(t, "path", "generic")
	if code != cli.ExitFail || out != "" || !strings.Contains(errs, "lockstep image build generic") {
		t.Errorf("image path generic (not built) = %d, %q, %q; want exit 1 naming the build command", code, out, errs)
	}
	code, out, _ = runImage(t, "list")
	if code != cli.ExitOK || !strings.Contains(out, "generic") || !strings.Contains(out, "not built") {
		t.Errorf("image list = %d, %q; want generic, not built", code, out)
	}
	code, out, _ = runImage(t, "list", "--json")
	var doc struct {
		Schema int `json:"schema_version"`
		Images []struct {
			Name      string `json:"name"`
			RecipeKey string `json:"recipe_key"`
		} `json:"images"`
	}
	if code != cli.ExitOK || json.Unmarshal([]byte(out), &doc) != nil || doc.Schema != 1 || len(doc.Images) == 0 || doc.Images[0].Name != "generic" || len(doc.Images[0].RecipeKey) != 64 {
		t.Errorf("image list --json = %d, %q; want schema 1 listing generic with its key", code, out)
	}
}
