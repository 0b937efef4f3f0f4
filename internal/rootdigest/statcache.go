package rootdigest

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/lockstep-sandbox/lockstep/internal/safefile"
)

// statCache maps a file's identity and change stamps to the SHA-256 it had,
// as git's index does: device, inode, size, mtime and ctime (which every
// write and chmod moves, and which no caller can set back). It lives in the
// user's cache directory, one file per root, and holds what the last digest
// of that root saw. It is a speed-up for the same user's next run, not a
// trust anchor: whoever can write the user's cache can as well change the
// root it describes.
type statCache struct {
	file string
	old  map[string]string
	seen map[string]string
}

// statCacheLimit bounds the cache file read back (about 120 bytes a file).
const statCacheLimit = 256 << 20

// loadStatCache reads root's cache; nil (hash everything) without a cache
// directory.
func loadStatCache(root string) *statCache {
	dir, err := os.UserCacheDir()
	if err != nil {
		return nil
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil
	}
	id := sha256.Sum256([]byte(abs))
	c := &statCache{file: filepath.Join(dir, "lockstep", "rootdigest", hex.EncodeToString(id[:8])+".txt"),
		old: map[string]string{}, seen: map[string]string{}}
	data, err := safefile.ReadFile(c.file, statCacheLimit)
	if err != nil {
		return c
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if k, sum, ok := strings.Cut(sc.Text(), " "); ok && len(sum) == 64 {
			c.old[k] = sum
		}
	}
	return c
}

// key is fi's identity and change stamps, "" when the system gives none.
func key(fi fs.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%d:%d:%d:%d.%d:%d.%d", st.Dev, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec)
}

func (c *statCache) lookup(fi fs.FileInfo) (string, bool) {
	if c == nil {
		return "", false
	}
	k := key(fi)
	sum, ok := c.old[k]
	if ok {
		c.seen[k] = sum
	}
	return sum, ok && k != ""
}

func (c *statCache) store(fi fs.FileInfo, sum string) {
	if c == nil || len(sum) != 64 {
		return // "unreadable" is not cached: a reader with rights differs
	}
	if k := key(fi); k != "" {
		c.seen[k] = sum
	}
}

// save writes what this digest saw, so entries of removed files go; a
// failure only costs the next run its speed.
func (c *statCache) save() {
	if c == nil {
		return
	}
	var b strings.Builder
	for k, sum := range c.seen {
		b.WriteString(k + " " + sum + "\n")
	}
	if err := os.MkdirAll(filepath.Dir(c.file), 0o700); err != nil {
		return
	}
	_ = safefile.WriteFile(c.file, []byte(b.String()), 0o600)
}
