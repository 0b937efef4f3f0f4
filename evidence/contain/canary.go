package contain

import (
	"fmt"
	"os"
	"path/filepath"
)

// planted are one run's canaries, made by plant: each template's file in a
// directory of this run's own.
type planted struct {
	files map[string]string // template → this run's file
	dirs  []string          // the directories plant made, each removed whole
}

// plant makes this run's canary (0644, CanaryText) for each template, in a
// new directory with a unique name where the template's first missing
// component would be: /root/lockstep-prune-canary-<random>/lockstep-prune-canary
// for /root/lockstep-prune-canary, /srv/lockstep-prune-canary-<random>/secret
// for /srv/lockstep-prune-canary/secret. Runs beside one another on one
// machine (parallel tests, two prunes, a guest whose root is the host's /
// under an overlay) thus never read, overwrite or remove each other's
// canaries, and none waits for another. The checks and the records name a
// canary by its template, the same in every run; the probe reads this run's
// file (args). Call remove also after an error.
func plant(templates []string) (*planted, error) {
	pl := &planted{files: map[string]string{}}
	for _, c := range templates {
		f, err := pl.plantOne(filepath.Clean(c))
		if err != nil {
			return pl, fmt.Errorf("planting canary %s: %w", c, err)
		}
		pl.files[c] = f
	}
	return pl, nil
}

// plantOne makes template c's file in a new directory of its own.
func (pl *planted) plantOne(c string) (string, error) {
	top := c
	for d := filepath.Dir(c); d != "/" && d != "."; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		}
		top = d
	}
	dir, err := os.MkdirTemp(filepath.Dir(top), filepath.Base(top)+"-")
	if err != nil {
		return "", err
	}
	pl.dirs = append(pl.dirs, dir)
	// MkdirTemp makes it 0700; the control may run as another user.
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	rest := filepath.Base(c)
	if top != c {
		rest, _ = filepath.Rel(top, c)
	}
	f := filepath.Join(dir, rest)
	if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
		return "", err
	}
	return f, os.WriteFile(f, []byte(CanaryText), 0o644)
}

// args is args with each planted template replaced by this run's file.
func (pl *planted) args(args []string) []string {
	out := append([]string(nil), args...)
	if pl == nil {
		return out
	}
	for i, a := range out {
		if f, ok := pl.files[a]; ok {
			out[i] = f
		}
	}
	return out
}

// remove removes every directory plant made, with its canary.
func (pl *planted) remove() {
	if pl == nil {
		return
	}
	for _, d := range pl.dirs {
		os.RemoveAll(d)
	}
}
