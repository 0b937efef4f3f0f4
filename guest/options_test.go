//go:build linux

package guest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-sandbox/lockstep/guest/proto"
)

// TestJobOptions: the options a host puts in job.json reach the role
// as PID 1 writes them, through the real JSON of a job; a job without
// options leaves no file, and a field the role does not know is refused.
func TestJobOptions(t *testing.T) {
	type opts struct {
		Key  string   `json:"key"`
		Argv []string `json:"argv"`
	}
	raw, err := json.Marshal(proto.Job{Schema: proto.SchemaVersion, ID: "a", Command: []string{proto.GuestBinary},
		Options: json.RawMessage(`{"key":"k","argv":["a b","--c"]}`)})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	jobFile := filepath.Join(dir, "job.json")
	if err := os.WriteFile(jobFile, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	job, err := readJob(jobFile, "a")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "run", "lockstep", "options.json")
	if err := writeOptions(path, job.Options); err != nil {
		t.Fatal(err)
	}
	var got opts
	if err := proto.ReadOptions(path, &got); err != nil || got.Key != "k" || strings.Join(got.Argv, "|") != "a b|--c" {
		t.Errorf("ReadOptions = %+v, %v; want key k, argv [a b --c]", got, err)
	}
	var narrow struct {
		Key string `json:"key"`
	}
	if err := proto.ReadOptions(path, &narrow); err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Errorf("ReadOptions into a type without argv = %v, want the unknown field refused", err)
	}
	none := filepath.Join(dir, "none.json")
	if err := writeOptions(none, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(none); !os.IsNotExist(err) {
		t.Errorf("a job without options wrote %s (%v)", none, err)
	}
}
