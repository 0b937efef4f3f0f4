//go:build linux

package audit

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	libaudit "github.com/elastic/go-libaudit/v2"
	"github.com/elastic/go-libaudit/v2/auparse"
)

// The tests below hold go-libaudit's Reassembler (v2.6.2) to our captured
// records: they show why Assemble, not the Reassembler, groups a run's
// records (docs/design.md, "Third-party modules"). Each fails when a newer
// go-libaudit stops doing what it shows, which is the moment to look again.

// reassembled is a libaudit.Stream that keeps what the Reassembler reports.
type reassembled struct {
	events [][]*auparse.AuditMessage
	lost   int
}

func (s *reassembled) ReassemblyComplete(m []*auparse.AuditMessage) { s.events = append(s.events, m) }
func (s *reassembled) EventsLost(n int)                             { s.lost += n }

// reassemble pushes a netlink.txt capture ("<type> <body>" lines) into a
// Reassembler whose timeout never passes during the test, as a collector
// streaming records would, and returns how many events it delivered while
// streaming, and the stream after Close flushed the rest.
func reassemble(t *testing.T, path string) (streamed int, s *reassembled) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s = &reassembled{}
	r, err := libaudit.NewReassembler(1000, time.Hour, s)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		typ, body, _ := strings.Cut(sc.Text(), " ")
		v, err := strconv.ParseUint(typ, 10, 16)
		if err != nil {
			t.Fatalf("%s: %q: %v", path, sc.Text(), err)
		}
		if err := r.Push(auparse.AuditMessageType(v), []byte(body)); err != nil {
			t.Fatalf("%s: Push(%q): %v", path, sc.Text(), err)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	streamed = len(s.events)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	return streamed, s
}

// TestReassemblerHoldsEventsBehindDeallocation: Landlock's deallocation
// record is logged outside any system call, so no EOE record ends its
// event; the Reassembler delivers in serial order and holds it, and every
// event after it, until its timeout. On the guest capture, 9 of 102 events
// come out while streaming; the collector's own barrier message right
// after the first deallocation (serial 79) is among those held, so a run's
// End would wait the timeout for every domain. Grouping itself agrees with
// Assemble: every denial's event holds the SYSCALL record of its serial.
func TestReassemblerHoldsEventsBehindDeallocation(t *testing.T) {
	streamed, s := reassemble(t, "../../testdata/audit/linux-7.2.13-guest/netlink.txt")
	if streamed != 9 || len(s.events) != 102 {
		t.Fatalf("Reassembler delivered %d events while streaming, %d in all; the capture gave 9 and 102", streamed, len(s.events))
	}
	held := s.events[streamed]
	if held[0].RecordType != auparse.AuditMessageType(TypeLandlockDomain) || !strings.Contains(held[0].RawData, "status=deallocated") {
		t.Errorf("first held event = %s, want the deallocation record", held[0].RawData)
	}
	barrier := s.events[streamed+1][0]
	if barrier.RecordType != typeUser || !strings.Contains(barrier.RawData, barrierPrefix) {
		t.Errorf("event after the deallocation = %s, want the collector's barrier message", barrier.RawData)
	}
	denials := 0
	for _, ev := range s.events {
		var access, syscall bool
		for _, m := range ev {
			access = access || m.RecordType == auparse.AuditMessageType(TypeLandlockAccess)
			syscall = syscall || m.RecordType == auparse.AuditMessageType(TypeSyscall)
		}
		if access {
			denials++
			if !syscall {
				t.Errorf("event %d: a denial without its SYSCALL record", ev[0].Sequence)
			}
		}
	}
	if denials == 0 {
		t.Error("no event held a denial")
	}
}

// TestReassemblerMissesKernelLoss: a burst of 400 refusals against a
// 16-record backlog (testdata/audit/loss-host) made the kernel drop
// records and count 365 lost, and Assemble reads 43 of 400 denials. The
// kernel stamps a record with its serial only once it has room for it, so
// the serials that did arrive have no gap, and the Reassembler's gap count,
// its only loss signal, reports none: the collector's lost accounting must
// come from the kernel's counter and the deallocation's denials=N.
func TestReassemblerMissesKernelLoss(t *testing.T) {
	const path = "../../testdata/audit/loss-host/netlink.txt"
	_, s := reassemble(t, path)
	if s.lost != 0 {
		t.Errorf("Reassembler reported %d lost; on this capture it reported none", s.lost)
	}
	run, err := os.ReadFile("../../testdata/audit/loss-host/run.txt")
	if err != nil {
		t.Fatal(err)
	}
	var pid, before, after int
	if _, err := fmt.Sscanf(string(run), "pid=%d kernel_lost_before=%d kernel_lost_after=%d", &pid, &before, &after); err != nil || after-before != 365 {
		t.Fatalf("run.txt = %q (%v), want pid and the kernel's lost counter moving by 365", run, err)
	}
	res := Assemble(readNetlink(t, path), func(p int) bool { return p == pid })
	if len(res.Domains) != 1 || len(res.Domains[0].Denials) != 43 || !res.Indeterminate() {
		t.Fatalf("Assemble = %d domains, problems %q; want one domain with 43 denials and a problem", len(res.Domains), res.Problems)
	}
	if d := res.Domains[0].Deallocated; d == nil || d.Denials != 400 {
		t.Errorf("deallocation = %+v, want denials=400", d)
	}
}
