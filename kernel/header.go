package kernel

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
)

// Offsets of the x86 boot protocol's setup header (Documentation/arch/x86/boot.rst).
const (
	bootFlagOffset      = 0x1FE // 0xAA55
	headerMagicOffset   = 0x202 // "HdrS"
	kernelVersionOffset = 0x20E // u16: offset of the version string, minus 0x200
	setupHeaderBase     = 0x200
	maxVersionLen       = 512
)

// HeaderVersion reads the kernel version string a bzImage's setup header
// points to: the kernel_version field at 0x20E holds its offset from 0x200.
// The string is what `uname -a` shows, e.g. "7.2.13 (lockstep@lockstep) #1 SMP …".
func HeaderVersion(r io.ReaderAt) (string, error) {
	var hdr [0x210]byte
	if _, err := r.ReadAt(hdr[:], 0); err != nil {
		return "", fmt.Errorf("read setup header: %w (a bzImage is larger than %d bytes)", err, len(hdr))
	}
	if flag := binary.LittleEndian.Uint16(hdr[bootFlagOffset:]); flag != 0xAA55 {
		return "", fmt.Errorf("boot flag at 0x1FE is %#04x, want 0xaa55: not a bzImage", flag)
	}
	if magic := hdr[headerMagicOffset : headerMagicOffset+4]; string(magic) != "HdrS" {
		return "", fmt.Errorf("setup header magic at 0x202 is %q, want \"HdrS\": not a bzImage", magic)
	}
	off := int64(binary.LittleEndian.Uint16(hdr[kernelVersionOffset:]))
	if off == 0 {
		return "", fmt.Errorf("kernel_version field at 0x20E is 0: the bzImage carries no version string")
	}
	buf := make([]byte, maxVersionLen)
	n, err := r.ReadAt(buf, setupHeaderBase+off)
	if n == 0 && err != nil {
		return "", fmt.Errorf("read version string at %#x: %w", setupHeaderBase+off, err)
	}
	buf = buf[:n]
	end := bytes.IndexByte(buf, 0)
	if end < 0 {
		return "", fmt.Errorf("version string at %#x has no NUL within %d bytes", setupHeaderBase+off, maxVersionLen)
	}
	if end == 0 {
		return "", fmt.Errorf("version string at %#x is empty", setupHeaderBase+off)
	}
	return string(buf[:end]), nil
}

// versionMatches reports whether a header version string belongs to kernel
// version v: it starts with v followed by the end, a space, '-' or '+'
// (so "7.2.1" does not match "7.2.13 …").
func versionMatches(header, v string) bool {
	if len(header) < len(v) || header[:len(v)] != v {
		return false
	}
	if len(header) == len(v) {
		return true
	}
	switch header[len(v)] {
	case ' ', '-', '+':
		return true
	}
	return false
}
