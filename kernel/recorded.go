package kernel

import (
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// BzImagesFile is the name the embedded table of recorded bzImages is
// reported under.
const BzImagesFile = "kernel/bzimages.txt"

//go:embed bzimages.txt
var bzImagesTxt []byte

// RecordedImage is one row of the recorded-bzImage table: the SHA-256 that a
// build of Version gives with this toolchain. Key is the cache key of those
// inputs (the pin row, the fragment as applied to it and BuilderVersion come
// from the repository; the toolchain from the row), so a restored kernel is
// matched to its row by the key computed on this machine, never by what the
// cache entry says about itself.
type RecordedImage struct {
	Version       string
	Compiler      string // first line of `gcc --version`
	Make          string // first line of `make --version`
	Binutils      string // first line of `ld --version`
	Key           string
	BzImageSHA256 string

	File string // the table it came from
	Line int    // its line there
}

// rowFields is the number of "|"-separated fields of a row.
const rowFields = 6

// Row renders r as a line of the table.
func (r RecordedImage) Row() string {
	return strings.Join([]string{r.Version, r.Compiler, r.Make, r.Binutils, r.Key, r.BzImageSHA256}, " | ")
}

// Where names the row for messages: "kernel/bzimages.txt:14".
func (r RecordedImage) Where() string { return fmt.Sprintf("%s:%d", r.File, r.Line) }

// ParseRecordedImages parses a recorded-bzImage table: one row per line,
// "version | compiler | make | binutils | key | bzimage-sha256"; blank
// lines and lines starting with # are skipped. Every bad row is reported,
// each with its line; on error no rows are returned.
func ParseRecordedImages(file string, src []byte) ([]RecordedImage, error) {
	var rows []RecordedImage
	var errs []error
	seen := map[string]int{}
	for i, line := range strings.Split(string(src), "\n") {
		n := i + 1
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		r, msgs := parseRecordedRow(line)
		if first, dup := seen[r.Key]; dup && len(msgs) == 0 {
			msgs = append(msgs, fmt.Sprintf("key %s already recorded on line %d", r.Key, first))
		}
		for _, m := range msgs {
			errs = append(errs, fmt.Errorf("%s:%d: %s", file, n, m))
		}
		if len(msgs) > 0 {
			continue
		}
		seen[r.Key] = n
		r.File, r.Line = file, n
		rows = append(rows, r)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return rows, nil
}

func parseRecordedRow(line string) (RecordedImage, []string) {
	f := strings.Split(line, "|")
	if len(f) != rowFields {
		return RecordedImage{}, []string{fmt.Sprintf("%d fields, want %d: version | compiler | make | binutils | key | bzimage-sha256", len(f), rowFields)}
	}
	for i := range f {
		f[i] = strings.Join(strings.Fields(f[i]), " ")
	}
	r := RecordedImage{Version: f[0], Compiler: f[1], Make: f[2], Binutils: f[3], Key: f[4], BzImageSHA256: f[5]}
	var msgs []string
	if !versionRE.MatchString(r.Version) {
		msgs = append(msgs, fmt.Sprintf("version %q is not a kernel version like 7.2.13", r.Version))
	}
	for _, x := range []struct{ name, v string }{{"compiler", r.Compiler}, {"make", r.Make}, {"binutils", r.Binutils}} {
		if x.v == "" {
			msgs = append(msgs, x.name+" is empty")
		}
	}
	for _, x := range []struct{ name, v string }{{"key", r.Key}, {"bzimage-sha256", r.BzImageSHA256}} {
		if !sha256RE.MatchString(x.v) {
			msgs = append(msgs, fmt.Sprintf("%s %q, want 64 lower-case hex digits", x.name, x.v))
		}
	}
	return r, msgs
}

var embeddedRecorded = sync.OnceValues(func() ([]RecordedImage, error) {
	return ParseRecordedImages(BzImagesFile, bzImagesTxt)
})

// RecordedImages returns the embedded table, in file order.
func RecordedImages() []RecordedImage {
	rows, err := embeddedRecorded()
	if err != nil {
		panic("BUG(kernel): embedded " + BzImagesFile + " does not parse: " + err.Error())
	}
	return rows
}

// lookupRecorded returns the row recording key, or nil.
func lookupRecorded(rows []RecordedImage, key string) *RecordedImage {
	for i := range rows {
		if rows[i].Key == key {
			r := rows[i]
			return &r
		}
	}
	return nil
}
