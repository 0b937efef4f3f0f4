package observer

import (
	"bytes"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
)

// TraceSuffix ends the name of an exercise's compressed strace log:
// <key>_<ex>.abi10.observed.trace.gz.
const TraceSuffix = ".abi10.observed.trace.gz"

// Compress gzips a strace log (klauspost/compress, best speed: traces are
// large and repetitive, and the guest's CPU is the scarce part).
func Compress(trace []byte) ([]byte, error) {
	var b bytes.Buffer
	w, err := gzip.NewWriterLevel(&b, gzip.BestSpeed)
	if err != nil {
		return nil, fmt.Errorf("compress trace: %w", err)
	}
	if _, err := w.Write(trace); err != nil {
		return nil, fmt.Errorf("compress trace: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("compress trace: %w", err)
	}
	return b.Bytes(), nil
}

// Decompress reverses Compress, refusing more than max bytes of output.
func Decompress(gz []byte, max int64) ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, fmt.Errorf("decompress trace: %w", err)
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, fmt.Errorf("decompress trace: %w", err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("decompress trace: more than %d bytes", max)
	}
	return b, nil
}
