package proto

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// Messages written are read back unchanged, a long write split at
// MaxInputData; the stream ends with io.EOF.
func TestInputRoundTrip(t *testing.T) {
	var b bytes.Buffer
	long := bytes.Repeat([]byte{3}, MaxInputData+1)
	if err := WriteInputData(&b, []byte("print(1)\r")); err != nil {
		t.Fatal(err)
	}
	if err := WriteInputWindow(&b, 40, 132); err != nil {
		t.Fatal(err)
	}
	if err := WriteInputData(&b, long); err != nil {
		t.Fatal(err)
	}
	want := []InputMsg{{Kind: InputData, Data: []byte("print(1)\r")}, {Kind: InputWindow, Rows: 40, Cols: 132},
		{Kind: InputData, Data: long[:MaxInputData]}, {Kind: InputData, Data: long[MaxInputData:]}}
	for i, w := range want {
		m, err := ReadInput(&b)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if m.Kind != w.Kind || !bytes.Equal(m.Data, w.Data) || m.Rows != w.Rows || m.Cols != w.Cols {
			t.Fatalf("message %d = %+v, want %+v", i, m, w)
		}
	}
	if _, err := ReadInput(&b); err != io.EOF {
		t.Fatalf("after the last message: %v, want io.EOF", err)
	}
}

// Every malformed message is refused with its reason.
func TestInputRefused(t *testing.T) {
	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"unknown kind", []byte{'x', 0, 0}},
		{"data too long", []byte{'d', 0x10, 0x01}},
		{"window of 3 bytes", []byte{'w', 0, 3, 0, 1, 0}},
		{"window of size 0", []byte{'w', 0, 4, 0, 0, 0, 80}},
		{"header cut short", []byte{'d', 0}},
		{"payload cut short", []byte{'d', 0, 5, 'a'}},
	} {
		if _, err := ReadInput(bytes.NewReader(c.b)); err == nil || errors.Is(err, io.EOF) {
			t.Errorf("%s: ReadInput = %v, want a refusal", c.name, err)
		}
	}
}

func FuzzReadInput(f *testing.F) {
	var b bytes.Buffer
	WriteInputData(&b, []byte("x\x03"))
	WriteInputWindow(&b, 24, 80)
	f.Add(b.Bytes())
	f.Add([]byte{'w', 0, 4, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		for {
			m, err := ReadInput(r)
			if err != nil {
				return
			}
			switch m.Kind {
			case InputData:
				if len(m.Data) > MaxInputData {
					t.Fatalf("accepted %d data bytes", len(m.Data))
				}
			case InputWindow:
				if m.Rows == 0 || m.Cols == 0 {
					t.Fatalf("accepted window %dx%d", m.Rows, m.Cols)
				}
			default:
				t.Fatalf("accepted kind %q", m.Kind)
			}
		}
	})
}
