package contain

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// Plant writes each canary (0644, CanaryText), creating its directory, and
// returns the files and directories it created, for Remove.
func Plant(canaries []string) ([]string, error) {
	var created []string
	for _, c := range canaries {
		dir := filepath.Dir(c)
		var mk []string
		for d := dir; d != "/" && d != "."; d = filepath.Dir(d) {
			if _, err := os.Lstat(d); err == nil {
				break
			}
			mk = append(mk, d)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return created, fmt.Errorf("planting canary %s: %w", c, err)
		}
		created = append(created, mk...)
		_, err := os.Lstat(c)
		existed := err == nil
		// A canary that is already there is written all the same. In a
		// guest whose root is the host's / under an overlay, the write
		// copies it up, so the guest's canary no longer depends on the
		// host's: a containment run on the host (pruner/prune's host
		// tests beside cmd/lockstep's guest prune in one go test ./...)
		// removed its canary under the guest's feet, and the guest's
		// control read failed ("canary … (unproven)").
		if err := os.WriteFile(c, []byte(CanaryText), 0o644); err != nil {
			return created, fmt.Errorf("planting canary %s: %w", c, err)
		}
		if !existed {
			created = append(created, c)
		}
	}
	return created, nil
}

// Remove removes what Plant created, files before their directories.
func Remove(created []string) {
	sort.Slice(created, func(i, j int) bool { return len(created[i]) > len(created[j]) })
	for _, p := range created {
		os.Remove(p)
	}
}
