package proto

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestParseStatus(t *testing.T) {
	for _, tc := range []struct {
		Name    string
		Console string
		Want    int
		WantOK  bool
	}{
		{"plain", "boot\nLOCKSTEP-STATUS 7\n", 7, true},
		{"crlf", "boot\r\nLOCKSTEP-STATUS 0\r\n", 0, true},
		{"carriage return inside", "LOCKSTEP-STATUS 4\r2\n", 42, true},
		{"last of several", "LOCKSTEP-STATUS 1\nLOCKSTEP-STATUS 2\n", 2, true},
		{"mid line after kernel text", "[ 1.0] reboot: LOCKSTEP-STATUS 9 \n[ 1.1] reboot: Restarting system\n", 9, true},
		{"no newline at end", "x\nLOCKSTEP-STATUS 13", 13, true},
		{"two on one line takes the last", "LOCKSTEP-STATUS 1 LOCKSTEP-STATUS 5\n", 5, true},
		{"garbage after number", "LOCKSTEP-STATUS 5x\n", 0, false},
		{"garbage after number falls back to earlier", "LOCKSTEP-STATUS 6\nLOCKSTEP-STATUS 5x\n", 6, true},
		{"not numeric", "LOCKSTEP-STATUS x\n", 0, false},
		{"negative", "LOCKSTEP-STATUS -1\n", 0, false},
		{"above 255", "LOCKSTEP-STATUS 256\n", 0, false},
		{"missing", "kernel panic\n", 0, false},
		{"empty", "", 0, false},
		{"prefix without space", "LOCKSTEP-STATUS\n", 0, false},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			got, ok := ParseStatus([]byte(tc.Console))
			if got != tc.Want || ok != tc.WantOK {
				t.Errorf("ParseStatus(%q) = %d, %v, want %d, %v", tc.Console, got, ok, tc.Want, tc.WantOK)
			}
		})
	}
}

func TestParseSetupError(t *testing.T) {
	c := "boot\nLOCKSTEP-ERROR mount 9p root: no such device\r\nLOCKSTEP-STATUS 70\n"
	if got, want := ParseSetupError([]byte(c)), "mount 9p root: no such device"; got != want {
		t.Errorf("ParseSetupError = %q, want %q", got, want)
	}
	if got := ParseSetupError([]byte("LOCKSTEP-STATUS 0\n")); got != "" {
		t.Errorf("ParseSetupError without error line = %q, want empty", got)
	}
}

func TestFrameRoundTrip(t *testing.T) {
	for _, size := range []int{0, 1, 4096, 1 << 20} {
		payload := bytes.Repeat([]byte("lockstep"), size/8+1)[:size]
		var buf bytes.Buffer
		sum, err := WriteFrame(&buf, payload)
		if err != nil {
			t.Fatalf("WriteFrame(%d bytes): %v", size, err)
		}
		if buf.Len() != FrameHeaderSize+size {
			t.Errorf("frame of %d bytes is %d long, want %d", size, buf.Len(), FrameHeaderSize+size)
		}
		got, gotSum, err := ReadFrame(&buf, 1<<30)
		if err != nil {
			t.Fatalf("ReadFrame(%d bytes): %v", size, err)
		}
		if !bytes.Equal(got, payload) || gotSum != sum {
			t.Errorf("ReadFrame(%d bytes) = %d bytes %s, want %d bytes %s", size, len(got), gotSum, size, sum)
		}
	}
}

func TestFrameErrors(t *testing.T) {
	var good bytes.Buffer
	if _, err := WriteFrame(&good, []byte("results")); err != nil {
		t.Fatal(err)
	}
	corrupt := func(i int) []byte {
		b := bytes.Clone(good.Bytes())
		b[i] ^= 0xff
		return b
	}
	for _, tc := range []struct {
		Name  string
		Frame []byte
		Max   int64
		Want  error
	}{
		{"bad magic", corrupt(0), 100, ErrBadMagic},
		{"bad checksum", corrupt(16), 100, ErrBadChecksum},
		{"flipped payload", corrupt(FrameHeaderSize + 2), 100, ErrBadChecksum},
		{"too large", good.Bytes(), 3, ErrTooLarge},
		{"truncated payload", good.Bytes()[:good.Len()-1], 100, io.ErrUnexpectedEOF},
		{"truncated header", good.Bytes()[:10], 100, io.ErrUnexpectedEOF},
		{"empty", nil, 100, io.EOF},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			_, _, err := ReadFrame(bytes.NewReader(tc.Frame), tc.Max)
			if !errors.Is(err, tc.Want) {
				t.Errorf("ReadFrame = %v, want %v", err, tc.Want)
			}
		})
	}
}

func writeEvents(t testing.TB, evs ...Event) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	ew := NewEventWriter(&buf)
	for _, e := range evs {
		if err := ew.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	return &buf
}

func readAll(er *EventReader) ([]Event, error) {
	var evs []Event
	for {
		e, err := er.Next()
		if err == io.EOF {
			return evs, nil
		}
		if err != nil {
			return evs, err
		}
		evs = append(evs, e)
	}
}

func TestEventStream(t *testing.T) {
	var buf bytes.Buffer
	ew := NewEventWriter(&buf)
	for _, e := range []Event{
		{Type: EventHello, Msg: "7.2.13"},
		{Type: EventStdout, Data: []byte("hello\n")},
		{Type: EventStderr, Data: []byte{0, 1, 2, 0xff}},
	} {
		if err := ew.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := ew.Done(7, "ab", 2); err != nil {
		t.Fatal(err)
	}
	er := NewEventReader(&buf)
	evs, err := readAll(er)
	if err != nil {
		t.Fatalf("reading a good stream: %v", err)
	}
	if len(evs) != 4 {
		t.Fatalf("read %d events, want 4", len(evs))
	}
	if got := string(evs[2].Data); got != "\x00\x01\x02\xff" {
		t.Errorf("binary stderr chunk = %q", got)
	}
	d := er.Done()
	want := Done{Events: 3, StdoutBytes: 6, StderrBytes: 4, Status: 7, ResultsSHA256: "ab", ResultsBytes: 2}
	if d == nil || *d != want {
		t.Errorf("Done() = %+v, want %+v", d, want)
	}
}

func TestEventStreamErrors(t *testing.T) {
	good := writeEvents(t, Event{Type: EventHello}, Event{Type: EventStdout, Data: []byte("x")}).String()
	lines := strings.SplitAfter(good, "\n")
	for _, tc := range []struct {
		Name   string
		Stream string
		Want   error
	}{
		{"missing done", good, ErrMissingDone},
		{"empty stream", "", ErrMissingDone},
		{"gap", lines[1] + `{"seq":1,"type":"done","done":{"events":1}}` + "\n", ErrSeqGap},
		{"done counts wrong", good + `{"seq":2,"type":"done","done":{"events":2,"stdout_bytes":5}}` + "\n", ErrBadCounts},
		{"done event count wrong", good + `{"seq":2,"type":"done","done":{"events":1,"stdout_bytes":1}}` + "\n", ErrBadCounts},
		{"event after done", good + `{"seq":2,"type":"done","done":{"events":2,"stdout_bytes":1}}` + "\n" + `{"seq":3,"type":"log"}` + "\n", ErrAfterDone},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			_, err := readAll(NewEventReader(strings.NewReader(tc.Stream)))
			if !errors.Is(err, tc.Want) {
				t.Errorf("reading %q: %v, want %v", tc.Stream, err, tc.Want)
			}
		})
	}
	_, err := readAll(NewEventReader(strings.NewReader("{not json\n")))
	if err == nil {
		t.Error("reading a line that is not JSON succeeded")
	}
}

func FuzzParseStatus(f *testing.F) {
	for _, s := range []string{"LOCKSTEP-STATUS 0\n", "a\r\nLOCKSTEP-STATUS 255\r\n", "LOCKSTEP-STATUS 1 LOCKSTEP-STATUS 2", "LOCKSTEP-STATUS -3", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, ok := ParseStatus(b)
		if !ok {
			if n != 0 {
				t.Fatalf("ParseStatus(%q) = %d, false; want 0 with false", b, n)
			}
			return
		}
		if n < 0 || n > 255 {
			t.Fatalf("ParseStatus(%q) = %d, out of range", b, n)
		}
		if !bytes.Contains(bytes.ReplaceAll(b, []byte{'\r'}, nil), []byte(StatusPrefix)) {
			t.Fatalf("ParseStatus(%q) = %d without a status prefix", b, n)
		}
		// Appending a newer status line always wins.
		if m, ok := ParseStatus(append(bytes.Clone(b), "\nLOCKSTEP-STATUS 42\n"...)); !ok || m != 42 {
			t.Fatalf("ParseStatus(%q + newer line) = %d, %v; want 42", b, m, ok)
		}
	})
}

func FuzzReadFrame(f *testing.F) {
	var good bytes.Buffer
	WriteFrame(&good, []byte("seed payload"))
	f.Add(good.Bytes())
	f.Add([]byte("LSRESv1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		payload, sum, err := ReadFrame(bytes.NewReader(b), 1<<16)
		if err != nil {
			if payload != nil || sum != "" {
				t.Fatalf("ReadFrame error %v with a result", err)
			}
			return
		}
		var again bytes.Buffer
		s2, err := WriteFrame(&again, payload)
		if err != nil || s2 != sum || !bytes.Equal(again.Bytes(), b[:again.Len()]) {
			t.Fatalf("frame does not round-trip: %v", err)
		}
	})
}

func FuzzEventReader(f *testing.F) {
	f.Add(writeEvents(f, Event{Type: EventHello}, Event{Type: EventStdout, Data: []byte("x")}).Bytes())
	f.Add([]byte(`{"seq":0,"type":"done","done":{"events":0}}` + "\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		er := NewEventReader(bytes.NewReader(b))
		evs, err := readAll(er)
		if err == nil {
			if er.Done() == nil {
				t.Fatal("stream accepted without done")
			}
			if len(evs) == 0 || evs[len(evs)-1].Type != EventDone {
				t.Fatal("accepted stream does not end with done")
			}
			for i, e := range evs {
				if e.Seq != uint64(i) {
					t.Fatalf("accepted event %d has seq %d", i, e.Seq)
				}
			}
		}
	})
}

func BenchmarkEventReader(b *testing.B) {
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 256)
	var evs []Event
	for range 256 {
		evs = append(evs, Event{Type: EventStdout, Data: chunk})
	}
	var buf bytes.Buffer
	ew := NewEventWriter(&buf)
	for _, e := range evs {
		ew.Write(e)
	}
	ew.Done(0, "", 0)
	stream := buf.Bytes()
	b.ReportAllocs()
	b.SetBytes(int64(len(stream)))
	for b.Loop() {
		if _, err := readAll(NewEventReader(bytes.NewReader(stream))); err != nil {
			b.Fatal(err)
		}
	}
}
