package audit

import (
	"bufio"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// captureDirs are the real captures made by `lockstep selftest --in-guest
// --capture` (see each directory's README.md).
var captureDirs = []string{
	"../../testdata/audit/linux-6.18.44-host",
	"../../testdata/audit/linux-7.2.13-guest",
}

// readNetlink parses a netlink.txt capture ("<type> <body>" lines).
func readNetlink(t testing.TB, path string) []Record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recs []Record
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		typ, body, ok := strings.Cut(sc.Text(), " ")
		v, err := strconv.ParseUint(typ, 10, 16)
		if !ok || err != nil {
			t.Fatalf("%s:%d: not <type> <body>: %q", path, n, sc.Text())
		}
		r, err := ParseNetlink(uint16(v), []byte(body))
		if err != nil {
			t.Fatalf("%s:%d: %v", path, n, err)
		}
		recs = append(recs, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return recs
}

// captureCase is one line of cases.txt.
type captureCase struct {
	Pass, Name string
	Pid        int
	Errno      string
	Dir        string
	Port       int
}

func readCases(t testing.TB, path string) []captureCase {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cs []captureCase
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.HasPrefix(l, "#") {
			continue
		}
		f := strings.Fields(l)
		c := captureCase{Pass: f[0], Name: f[1]}
		for _, kv := range f[2:] {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "pid":
				c.Pid, _ = strconv.Atoi(v)
			case "errno":
				c.Errno = v
			case "dir":
				c.Dir = v
			case "port":
				c.Port, _ = strconv.Atoi(v)
			}
		}
		cs = append(cs, c)
	}
	return cs
}

// byCase assembles a pass's records per scenario: the domain each child
// created, its denials and its deallocation.
func byCase(recs []Record, cases []captureCase, pass string) map[string]*DomainLog {
	out := map[string]*DomainLog{}
	for _, c := range cases {
		if c.Pass != pass {
			continue
		}
		pid := c.Pid
		res := Assemble(recs, func(p int) bool { return p == pid })
		if len(res.Domains) == 1 {
			out[c.Name] = res.Domains[0]
		}
	}
	return out
}

func TestCaptures(t *testing.T) {
	for _, dir := range captureDirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			cases := readCases(t, filepath.Join(dir, "cases.txt"))
			netlink := readNetlink(t, filepath.Join(dir, "netlink.txt"))
			kmsg := readCapture(t, filepath.Join(dir, "kmsg.txt"))
			dmesg := readCapture(t, filepath.Join(dir, "dmesg.txt"))
			for _, r := range kmsg {
				if r.Form != FormKmsg || r.KmsgSeq == 0 {
					t.Fatalf("kmsg record %q: form %v seq %d", r.String(), r.Form, r.KmsgSeq)
				}
			}
			// dmesg formats the same ring as kmsg: same records, same order.
			if len(dmesg) != len(kmsg) {
				t.Errorf("dmesg.txt has %d records, kmsg.txt %d", len(dmesg), len(kmsg))
			} else {
				for i := range kmsg {
					if dmesg[i].Body() != kmsg[i].Body() || dmesg[i].Type != kmsg[i].Type {
						t.Errorf("record %d: dmesg %q, kmsg %q", i, dmesg[i].String(), kmsg[i].String())
					}
				}
			}
			passes := map[string]map[string]*DomainLog{
				"netlink": byCase(netlink, cases, "netlink"),
				"printk":  byCase(kmsg, cases, "printk"),
			}
			if _, err := os.Stat(filepath.Join(dir, "auditd.log")); err == nil {
				auditd := readCapture(t, filepath.Join(dir, "auditd.log"))
				for _, r := range auditd {
					if r.Form != FormAuditd {
						t.Fatalf("auditd.log record %q: form %v", r.String(), r.Form)
					}
				}
				acases := readCases(t, filepath.Join(dir, "auditd-cases.txt"))
				passes["auditd"] = byCase(auditd, acases, "auditd")
				cases = append(cases, acases...)
			}
			for _, c := range cases {
				d := passes[c.Pass][c.Name]
				if d == nil {
					t.Errorf("%s %s (pid %d): no domain", c.Pass, c.Name, c.Pid)
					continue
				}
				checkCase(t, c, d, c.Pass != "printk")
			}
		})
	}
}

// checkCase holds each scenario's records to what Linux 7.2's
// security/landlock/audit.c writes.
func checkCase(t *testing.T, c captureCase, d *DomainLog, withSyscall bool) {
	t.Helper()
	name := c.Pass + " " + c.Name
	if d.Deallocated == nil || d.Deallocated.Denials != uint64(len(d.Denials)) {
		t.Errorf("%s: deallocation %+v for %d denials", name, d.Deallocated, len(d.Denials))
	}
	if d.Allocated.Mode != "enforcing" || d.Allocated.Exe == "" || d.Allocated.Comm == "" {
		t.Errorf("%s: allocated record %+v", name, d.Allocated)
	}
	want := 1
	if c.Name == "capture.rename_two" {
		want = 2 // source parent, then destination parent
	}
	if len(d.Denials) != want {
		t.Fatalf("%s: %d denials, want %d", name, len(d.Denials), want)
	}
	a := d.Denials[0].Access
	if withSyscall {
		s := d.Denials[0].Syscall
		if s == nil || s.Pid != c.Pid || s.Success || s.Exit >= 0 {
			t.Errorf("%s: SYSCALL %+v, want a failed call by pid %d", name, s, c.Pid)
		}
	}
	blockers := strings.Join(a.Blockers, ",")
	wantBlockers := map[string]string{
		"capture.hex_path": "fs.read_file", "capture.deleted": "fs.truncate", "capture.rename_two": "fs.refer",
		"capture.rw_both": "fs.write_file,fs.read_file", "capture.tcp_lport": "net.connect_tcp",
		"capture.udp_lport": "net.connect_send_udp", "capture.udp_autobind": "net.bind_udp",
		"capture.abstract_unix": "scope.abstract_unix_socket", "scope.signal": "scope.signal",
	}[c.Name]
	if wantBlockers == "" {
		b, ok := LookupBlocker("fs." + c.Name)
		if !ok {
			b, _ = LookupBlocker("net." + c.Name)
		}
		wantBlockers = string(b.Right)
	}
	if blockers != wantBlockers {
		t.Errorf("%s: blockers %s, want %s", name, blockers, wantBlockers)
	}
	switch c.Name {
	case "capture.hex_path":
		raw, _ := d.Denials[0].Record.Raw("path")
		if a.Path != c.Dir+"/with space" || strings.Contains(raw, "/") {
			t.Errorf("%s: path %q (raw %q), want hex of %q", name, a.Path, raw, c.Dir+"/with space")
		}
	case "capture.deleted":
		if a.Path != c.Dir+"/gone (deleted)" {
			t.Errorf("%s: path %q, want %q", name, a.Path, c.Dir+"/gone (deleted)")
		}
	case "capture.rename_two":
		b := d.Denials[1].Access
		if a.Path != c.Dir+"/src" || b.Path != c.Dir+"/dst" || d.Denials[1].Record.Serial != d.Denials[0].Record.Serial {
			t.Errorf("%s: paths %q, %q, want the source then the destination parent in one event", name, a.Path, b.Path)
		}
	case "capture.tcp_lport", "capture.udp_lport":
		if a.LPort != uint16(c.Port) || a.Dest != uint16(c.Port+1000) || !a.LAddr.IsLoopback() || a.Src != 0 {
			t.Errorf("%s: %+v, want lport %d dest %d", name, a, c.Port, c.Port+1000)
		}
	case "capture.udp_autobind":
		if a.LPort != 0 || a.Src != 0 {
			t.Errorf("%s: %+v, want no bound or asked port", name, a)
		}
	case "capture.abstract_unix":
		if want := "\x00lockstep-proof-" + strconv.Itoa(c.Port); a.Path != want {
			t.Errorf("%s: path %q, want %q", name, a.Path, want)
		}
	case "bind_tcp", "bind_udp":
		if a.Src != uint16(c.Port) || a.LPort != 0 {
			t.Errorf("%s: %+v, want src %d and no lport", name, a, c.Port)
		}
	case "connect_tcp", "connect_send_udp":
		if a.Dest != uint16(c.Port) || a.LPort != 0 {
			t.Errorf("%s: %+v, want dest %d and no lport", name, a, c.Port)
		}
	case "ioctl_dev":
		if a.Path != "/dev/null" || a.IoctlCmd != 0x5401 || a.Dev != "devtmpfs" {
			t.Errorf("%s: %+v, want /dev/null ioctlcmd 0x5401 on devtmpfs", name, a)
		}
	case "scope.signal":
		if a.OPid == 0 || a.OComm == "" {
			t.Errorf("%s: %+v, want opid and ocomm", name, a)
		}
	}
}

// TestCaptureFormsAgree: the kernel writes the same fields whichever way a
// record leaves it; the netlink and printk passes differ only in IDs,
// stamps, pids and scratch names.
func TestCaptureFormsAgree(t *testing.T) {
	for _, dir := range captureDirs {
		if _, err := os.Stat(dir); os.IsNotExist(err) {
			continue
		}
		kmsg := readCapture(t, filepath.Join(dir, "kmsg.txt"))
		netlink := readNetlink(t, filepath.Join(dir, "netlink.txt"))
		keys := func(recs []Record) []string {
			var ks []string
			for _, r := range recs {
				if r.Type != TypeLandlockAccess && r.Type != TypeLandlockDomain {
					continue
				}
				var k []string
				for _, f := range r.Fields() {
					k = append(k, f.Key)
				}
				ks = append(ks, strconv.Itoa(int(r.Type))+" "+strings.Join(k, " "))
			}
			return ks
		}
		if nk, kk := keys(netlink), keys(kmsg); !reflect.DeepEqual(nk, kk) {
			t.Errorf("%s: the netlink and kmsg passes differ in record shapes:\nnetlink %q\nkmsg    %q", dir, nk, kk)
		}
	}
}
