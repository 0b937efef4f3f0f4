package kernel

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/lockstep-sandbox/lockstep/internal/safefile"
)

// PinsEnv names the variable that adds pin files to the shipped table: one
// file, or several separated by ':', in the grammar of kernel/pins.txt.
const PinsEnv = "LOCKSTEP_PINS"

// ShippedOrigin is what Pin.Origin says of a pin of the embedded table.
const ShippedOrigin = "shipped"

// maxPinsFile bounds a pin file read: rows are short, a table is small.
const maxPinsFile = 1 << 20

// added holds the pins of pin files: LOCKSTEP_PINS's (read on first use)
// and UsePinsFile's, in the order they were added.
var added struct {
	mu      sync.Mutex
	envDone bool
	envErr  error
	files   []string
	pins    []Pin
}

// Origin is where the pin came from: ShippedOrigin for the embedded table,
// else the pin file's path.
func (p Pin) Origin() string {
	if p.File == PinsFile {
		return ShippedOrigin
	}
	return p.File
}

// UsePinsFile adds the pins of file to the table AllPins and Lookup see,
// after LOCKSTEP_PINS's. Adding a file twice adds it once. A row may repeat
// a pin already known word for word (it is then the known pin); one that
// gives a known name other contents is refused, naming both rows.
func UsePinsFile(file string) error {
	added.mu.Lock()
	defer added.mu.Unlock()
	if err := loadEnvPins(); err != nil {
		return err
	}
	return addPinsFile(file)
}

// AllPins returns the shipped pins, then every added pin file's, or the
// first error of a pin file that cannot be read or does not fit.
func AllPins() ([]Pin, error) {
	added.mu.Lock()
	defer added.mu.Unlock()
	if err := loadEnvPins(); err != nil {
		return nil, err
	}
	return append(append([]Pin{}, Pins()...), added.pins...), nil
}

// loadEnvPins adds LOCKSTEP_PINS's files once; added.mu is held.
func loadEnvPins() error {
	if added.envDone {
		return added.envErr
	}
	added.envDone = true
	for _, f := range strings.Split(os.Getenv(PinsEnv), ":") {
		if f == "" {
			continue
		}
		if err := addPinsFile(f); err != nil {
			added.envErr = fmt.Errorf("%s: %w", PinsEnv, err)
			return added.envErr
		}
	}
	return nil
}

// addPinsFile parses file and merges its pins; added.mu is held. Nothing is
// added when any row is refused.
func addPinsFile(file string) error {
	abs, err := filepath.Abs(file)
	if err != nil {
		return fmt.Errorf("pin file %s: %w", file, err)
	}
	for _, f := range added.files {
		if f == abs {
			return nil
		}
	}
	src, err := safefile.ReadFile(file, maxPinsFile)
	if err != nil {
		return fmt.Errorf("pin file %s: %w (want a file of rows in the grammar of %s)", file, err, PinsFile)
	}
	pins, err := ParsePins(file, src)
	if err != nil {
		return err
	}
	fresh, err := mergePins(append(append([]Pin{}, Pins()...), added.pins...), pins)
	if err != nil {
		return err
	}
	added.files = append(added.files, abs)
	added.pins = append(added.pins, fresh...)
	return nil
}

// mergePins returns the pins of more that known lacks. A pin of more whose
// name is known is dropped when its row is the known one word for word, and
// refused otherwise: a name stands for one kernel. Every conflict is
// reported, in one PinErrors.
func mergePins(known, more []Pin) ([]Pin, error) {
	byName := map[string]Pin{}
	for _, p := range known {
		byName[p.Version] = p
	}
	var fresh []Pin
	var errs PinErrors
	for _, p := range more {
		k, ok := byName[p.Version]
		switch {
		case !ok:
			fresh = append(fresh, p)
		case k.Row != p.Row:
			what := "the pin"
			if k.Origin() == ShippedOrigin {
				what = "the shipped pin"
			}
			errs = append(errs, &PinError{File: p.File, Line: p.Line,
				Msg: fmt.Sprintf("pin %s redefines %s of %s:%d with other contents; give this row another name", p.Version, what, k.File, k.Line)})
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return fresh, nil
}
