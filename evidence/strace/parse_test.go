package strace

import (
	"io"
	"net/netip"
	"os"
	"reflect"
	"strings"
	"testing"
)

func parseAll(t *testing.T, text string) ([]*Call, Stats) {
	t.Helper()
	p := NewParser(strings.NewReader(text))
	var out []*Call
	for {
		c, err := p.Next()
		if err == io.EOF {
			return out, p.Stats()
		}
		if err != nil {
			t.Fatalf("Next() = %v", err)
		}
		out = append(out, c)
	}
}

func TestLines(t *testing.T) {
	for _, tc := range []struct {
		Name string
		Line string
		Want Call
	}{{
		Name: "refused open",
		Line: `12170 openat(AT_FDCWD</tmp/llcap>, "/tmp/llcap/secret/s.txt", O_RDONLY) = -1 EACCES (Permission denied)`,
		Want: Call{PID: 12170, Name: "openat", Args: []Arg{"AT_FDCWD</tmp/llcap>", `"/tmp/llcap/secret/s.txt"`, "O_RDONLY"},
			Ret: "-1", Errno: "EACCES", ErrnoText: "Permission denied"},
	}, {
		Name: "fd result with annotation and padding",
		Line: `12195 openat(AT_FDCWD</tmp/llcap>, "/tmp/llcap/rd/tool.sh", O_RDONLY) = 3</tmp/llcap/rd/tool.sh>`,
		Want: Call{PID: 12195, Name: "openat", Args: []Arg{"AT_FDCWD</tmp/llcap>", `"/tmp/llcap/rd/tool.sh"`, "O_RDONLY"},
			Ret: "3</tmp/llcap/rd/tool.sh>"},
	}, {
		Name: "unknown constant and misannotated result",
		Line: `12160 landlock_create_ruleset(NULL, 0, 0x2 /* LANDLOCK_CREATE_RULESET_??? */) = 7<anon_inode:[eventfd]>`,
		Want: Call{PID: 12160, Name: "landlock_create_ruleset", Args: []Arg{"NULL", "0", "0x2 /* LANDLOCK_CREATE_RULESET_??? */"},
			Ret: "7<anon_inode:[eventfd]>"},
	}, {
		Name: "padded result, detail, bracket pid",
		Line: `[pid  4242] fcntl(3</etc/x>, F_GETFD)   = 0x1 (flags FD_CLOEXEC)`,
		Want: Call{PID: 4242, Name: "fcntl", Args: []Arg{"3</etc/x>", "F_GETFD"}, Ret: "0x1", Detail: "flags FD_CLOEXEC"},
	}, {
		Name: "restart errno without pid",
		Line: `wait4(-1, 0x7ffd, 0, NULL) = ? ERESTARTSYS (To be restarted if SA_RESTART is set)`,
		Want: Call{Name: "wait4", Args: []Arg{"-1", "0x7ffd", "0", "NULL"}, Ret: "?", Errno: "ERESTARTSYS",
			ErrnoText: "To be restarted if SA_RESTART is set"},
	}, {
		Name: "no arguments",
		Line: `77 setsid() = -1 EPERM (Operation not permitted)`,
		Want: Call{PID: 77, Name: "setsid", Ret: "-1", Errno: "EPERM", ErrnoText: "Operation not permitted"},
	}, {
		Name: "-yy socket annotation with an arrow",
		Line: `9 connect(5<TCP:[127.0.0.1:40000->127.0.0.1:5000]>, {sa_family=AF_INET, sin_port=htons(5000), sin_addr=inet_addr("127.0.0.1")}, 16) = 0`,
		Want: Call{PID: 9, Name: "connect", Args: []Arg{"5<TCP:[127.0.0.1:40000->127.0.0.1:5000]>",
			`{sa_family=AF_INET, sin_port=htons(5000), sin_addr=inet_addr("127.0.0.1")}`, "16"}, Ret: "0"},
	}, {
		Name: "string with escapes, brackets and a truncation mark",
		Line: `5 write(1<pipe:[9]>, "a\"), b\\\n(\0"..., 4096) = 4096`,
		Want: Call{PID: 5, Name: "write", Args: []Arg{"1<pipe:[9]>", `"a\"), b\\\n(\0"...`, "4096"}, Ret: "4096"},
	}, {
		Name: "annotation with escaped angle brackets",
		Line: `16256 read(3</tmp/esc/a\76b\74c\\d\"e\nf\tg\1h \303\251>, "hi\n", 131072) = 3`,
		Want: Call{PID: 16256, Name: "read", Args: []Arg{`3</tmp/esc/a\76b\74c\\d\"e\nf\tg\1h \303\251>`, `"hi\n"`, "131072"}, Ret: "3"},
	}} {
		t.Run(tc.Name, func(t *testing.T) {
			calls, _ := parseAll(t, tc.Line+"\n")
			if len(calls) != 1 {
				t.Fatalf("got %d calls, want 1", len(calls))
			}
			got := *calls[0]
			got.Line, got.TGID = 0, 0
			if !reflect.DeepEqual(got, tc.Want) {
				t.Errorf("parse(%q)\n got %#v\nwant %#v", tc.Line, got, tc.Want)
			}
		})
	}
}

func TestFD(t *testing.T) {
	for _, tc := range []struct {
		Arg  Arg
		Want FD
	}{
		{"AT_FDCWD</tmp/llcap>", FD{Num: ATFDCWD, Annotation: "/tmp/llcap", Path: "/tmp/llcap"}},
		{"3", FD{Num: 3}},
		{"5<socket:[27362]>", FD{Num: 5, Annotation: "socket:[27362]", Proto: "socket", Inode: 27362}},
		{"6<anon_inode:[eventpoll]>", FD{Num: 6, Annotation: "anon_inode:[eventpoll]", Proto: "anon_inode"}},
		{"5<TCP:[127.0.0.1:1->127.0.0.1:2]>", FD{Num: 5, Annotation: "TCP:[127.0.0.1:1->127.0.0.1:2]", Proto: "TCP"}},
		{"5<UDPv6:[4567]>", FD{Num: 5, Annotation: "UDPv6:[4567]", Proto: "UDPv6", Inode: 4567}},
		{`3</tmp/a\76b>`, FD{Num: 3, Annotation: "/tmp/a>b", Path: "/tmp/a>b"}},
		{"1</dev/null<char 1:3>>", FD{Num: 1, Annotation: "/dev/null", Path: "/dev/null"}},
	} {
		got, ok := tc.Arg.FD()
		if !ok || got != tc.Want {
			t.Errorf("Arg(%q).FD() = %+v, %v, want %+v", tc.Arg, got, ok, tc.Want)
		}
	}
	for _, bad := range []Arg{`"/etc"`, "NULL", "3<unterminated"} {
		if fd, ok := bad.FD(); ok {
			t.Errorf("Arg(%q).FD() = %+v, want no descriptor", bad, fd)
		}
	}
}

func TestSockAddr(t *testing.T) {
	for _, tc := range []struct {
		Arg  Arg
		Want SockAddr
	}{
		{`{sa_family=AF_INET, sin_port=htons(40102), sin_addr=inet_addr("127.0.0.1")}`,
			SockAddr{Family: "AF_INET", Addr: netip.MustParseAddr("127.0.0.1"), Port: 40102}},
		{`{sa_family=AF_INET6, sin6_port=htons(40103), sin6_flowinfo=htonl(0), inet_pton(AF_INET6, "::1", &sin6_addr), sin6_scope_id=0}`,
			SockAddr{Family: "AF_INET6", Addr: netip.MustParseAddr("::1"), Port: 40103}},
		{`{sa_family=AF_UNIX, sun_path="/tmp/llcap/ro/sock"}`, SockAddr{Family: "AF_UNIX", Path: "/tmp/llcap/ro/sock", Port: -1}},
		{`{sa_family=AF_UNIX, sun_path=@"/tmp/.X11-unix/X0"}`, SockAddr{Family: "AF_UNIX", Path: "/tmp/.X11-unix/X0", Abstract: true, Port: -1}},
		{`{msg_name={sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("10.0.0.1")}, msg_namelen=16, msg_iov=[{iov_base="x", iov_len=1}], msg_iovlen=1, msg_controllen=0, msg_flags=0}`,
			SockAddr{Family: "AF_INET", Addr: netip.MustParseAddr("10.0.0.1"), Port: 53}},
	} {
		got, ok := tc.Arg.SockAddr()
		if !ok || got != tc.Want {
			t.Errorf("Arg(%q).SockAddr() = %+v, %v, want %+v", tc.Arg, got, ok, tc.Want)
		}
	}
}

func TestFlags(t *testing.T) {
	a := Arg("O_WRONLY|O_CREAT|O_TRUNC|0x4000 /* O_??? */")
	if got, want := a.Flags(), []string{"O_WRONLY", "O_CREAT", "O_TRUNC", "0x4000"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Flags() = %q, want %q", got, want)
	}
	if !a.HasFlag("O_CREAT") || a.HasFlag("O_CREA") || a.HasFlag("O_RDWR") {
		t.Errorf("HasFlag wrong on %q", a)
	}
	if got := a.FlagBits(); got != 0x4000 {
		t.Errorf("FlagBits() = %#x, want 0x4000", got)
	}
	if got := Arg("0x8 /* LANDLOCK_RESTRICT_SELF_??? */").FlagBits(); got != 8 {
		t.Errorf("FlagBits() = %#x, want 0x8", got)
	}
}

func TestQuote(t *testing.T) {
	for _, tc := range []struct{ In, Want string }{
		{"plain", `"plain"`},
		{"x\x001\x1b[0m\x7f\xff2", `"x\0001\33[0m\177\3772"`},
		{"a\"b\\c\n\t", `"a\"b\\c\n\t"`},
	} {
		if got := Quote(tc.In); got != tc.Want {
			t.Errorf("Quote(%q) = %s, want %s", tc.In, got, tc.Want)
		}
		back, trunc, err := Unquote(tc.Want)
		if err != nil || trunc || back != tc.In {
			t.Errorf("Unquote(%s) = %q, %v, %v, want %q", tc.Want, back, trunc, err, tc.In)
		}
	}
	if s, trunc, err := Unquote(`"ab\x41"...`); err != nil || !trunc || s != "abA" {
		t.Errorf(`Unquote("ab\x41"...) = %q, %v, %v`, s, trunc, err)
	}
	for _, bad := range []string{`"a`, `a"`, `"\q"`, `"\"`, `"a"b"`, `"\400"`} {
		if s, _, err := Unquote(bad); err == nil {
			t.Errorf("Unquote(%s) = %q, want an error", bad, s)
		}
	}
	if got := QuotePath("/tmp/a>b<c"); got != `/tmp/a\76b\74c` {
		t.Errorf("QuotePath = %s", got)
	}
}

// TestJoin checks that halves are joined, that the child lines strace
// prints before its creator's clone returns are held until then, and that a
// thread's domain passes to what it creates afterwards.
func TestJoin(t *testing.T) {
	const trace = `100 landlock_restrict_self(3<anon_inode:[landlock-ruleset]>, 0) = 0
100 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD <unfinished ...>
101 openat(AT_FDCWD</w>, "/etc/shadow", O_RDONLY) = -1 EACCES (Permission denied)
200 read(4</x>,  <unfinished ...>
100 <... clone resumed>, child_tidptr=0x7f) = 101
200 <... read resumed>"ab", 2) = 2
101 wait4(-1,  <unfinished ...>
101 +++ killed by SIGKILL +++
100 <... wait4 resumed>[{WIFEXITED(s)}], 0, NULL) = 9
100 --- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_KILLED, si_pid=101} ---
100 +++ exited with 3 +++
`
	calls, st := parseAll(t, trace)
	var got []string
	for _, c := range calls {
		got = append(got, c.Kind.String()+" "+c.Name+" "+itoa(c.PID)+" "+itoa(c.Depth))
	}
	want := []string{
		"syscall landlock_restrict_self 100 0",
		"syscall clone 100 1",
		"syscall openat 101 1",
		"syscall read 200 0",
		"syscall wait4 101 1",
		"killed SIGKILL 101 1",
		"signal SIGCHLD 100 1",
		"exit  100 1",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events:\n got %q\nwant %q", got, want)
	}
	if c := calls[1]; !c.Joined || c.Ret != "101" || len(c.Args) != 3 || c.Args[2] != "child_tidptr=0x7f" || c.Line != 2 {
		t.Errorf("joined clone = %+v", c)
	}
	if c := calls[4]; !c.Unfinished || c.Ret != "" {
		t.Errorf("wait4 of a killed thread = %+v, want unfinished", c)
	}
	if st.Orphans != 1 || st.Unfinished != 1 || st.Unplaced != 1 {
		t.Errorf("stats = %+v, want 1 orphan (pid 100's wait4), 1 unfinished, 1 unplaced (pid 200)", st)
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	s := ""
	neg := n < 0
	if neg {
		n = -n
	}
	for n > 0 {
		s = string(rune('0'+n%10)) + s
		n /= 10
	}
	if neg {
		s = "-" + s
	}
	return s
}

// TestTSync: LANDLOCK_RESTRICT_SELF_TSYNC (printed by strace 6.1 as a
// number) puts every thread of the group in the domain; ruleset fd -1 puts
// nobody in one.
func TestTSync(t *testing.T) {
	const trace = `10 clone(child_stack=0x1, flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM|CLONE_SETTLS) = 11
10 clone3({flags=CLONE_VM|CLONE_VFORK, exit_signal=SIGCHLD, stack=0x2, stack_size=0x9000}, 88) = 12
12 landlock_restrict_self(-1, 0x2 /* LANDLOCK_RESTRICT_SELF_??? */) = 0
12 openat(AT_FDCWD</>, "a", O_RDONLY) = -1 ENOENT (No such file or directory)
10 landlock_restrict_self(3<anon_inode:[landlock-ruleset]>, 0x8 /* LANDLOCK_RESTRICT_SELF_??? */) = 0
11 openat(AT_FDCWD</>, "b", O_RDONLY) = -1 EACCES (Permission denied)
12 openat(AT_FDCWD</>, "c", O_RDONLY) = -1 ENOENT (No such file or directory)
`
	calls, _ := parseAll(t, trace)
	in := map[string]bool{}
	for _, c := range calls {
		if c.Name == "openat" {
			s, _ := c.Args[1].Str()
			in[s] = c.InDomain
		}
	}
	if want := map[string]bool{"a": false, "b": true, "c": false}; !reflect.DeepEqual(in, want) {
		t.Errorf("in domain = %v, want %v", in, want)
	}
	if calls[5].TGID != 10 || calls[6].TGID != 12 {
		t.Errorf("thread groups: %d, %d, want 10, 12", calls[5].TGID, calls[6].TGID)
	}
}

func TestSyntaxErrors(t *testing.T) {
	const trace = "1 openat(AT_FDCWD, \"a\n1 close(3) = 0\nnot a line at all\n1 +++ exited with x +++\n1 close(4) = 0\n"
	p := NewParser(strings.NewReader(trace))
	var errs, calls int
	for {
		c, err := p.Next()
		if err == io.EOF {
			break
		}
		if (c == nil) == (err == nil) {
			t.Fatalf("Next() = %v, %v: want exactly one of a call and an error", c, err)
		}
		if err != nil {
			errs++
			if _, ok := err.(*SyntaxError); !ok {
				t.Fatalf("error %v is %T, want *SyntaxError", err, err)
			}
			continue
		}
		calls++
	}
	if errs != 3 || calls != 2 {
		t.Errorf("got %d errors and %d calls, want 3 and 2", errs, calls)
	}
}

func TestParseFileLenient(t *testing.T) {
	p := t.TempDir() + "/cut.strace"
	text := "[ Process PID=5 runs in 32 bit mode. ]\n5 close(3) = 0\n5 openat(AT_FDCWD</w>, \"/et"
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseFile(p); err == nil {
		t.Error("ParseFile of a cut trace: no error")
	}
	tr, err := ParseFileLenient(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Calls) != 1 || len(tr.Errors) != 1 || tr.Errors[0].Line != 3 || tr.Stats.Messages != 1 {
		t.Errorf("lenient parse = %d calls, errors %v, stats %+v", len(tr.Calls), tr.Errors, tr.Stats)
	}
}

// TestLostClone: a clone cut short by its process's death returns no pid
// (`= ? <unavailable>`); the thread it made appears without a creator and
// takes the creator's domain and group.
func TestLostClone(t *testing.T) {
	const trace = `50 landlock_restrict_self(3<anon_inode:[landlock-ruleset]>, 0) = 0
50 clone(child_stack=0x1, flags=CLONE_VM|CLONE_THREAD|CLONE_SETTLS <unfinished ...>
51 ???( <unfinished ...>
50 <... clone resumed>) = ? <unavailable>
51 <... ??? resumed>) = ?
51 +++ killed by SIGKILL +++
`
	calls, st := parseAll(t, trace)
	if st.Inferred != 1 || st.Unplaced != 0 {
		t.Fatalf("stats = %+v, want one inferred thread", st)
	}
	c := calls[2]
	if c.PID != 51 || !c.InDomain || c.TGID != 50 || c.Name != "???" {
		t.Errorf("call of the lost thread = %+v", c)
	}
	if calls[1].Detail != "<unavailable>" || calls[1].Ret != "?" {
		t.Errorf("lost clone = %+v", calls[1])
	}
}

// TestInterleavedLine: strace began a call's line and printed the next
// event on the same line without ending the first (seen on this host when
// a thread was superseded by another's execve).
func TestInterleavedLine(t *testing.T) {
	const trace = `4686  ???(4686  +++ superseded by execve in pid 4690 +++
4686  <... execve resumed>) = 0
`
	calls, st := parseAll(t, "4690  execve(\"/bin/sh\", [\"sh\"], 0x1 /* 1 var */ <pid changed to 4686 ...>\n"+trace)
	var got []string
	for _, c := range calls {
		got = append(got, c.Kind.String()+" "+c.Name+" "+itoa(c.PID))
	}
	want := []string{"syscall ??? 4686", "superseded  4686", "syscall execve 4686"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
	if !calls[0].Unfinished || calls[2].Ret != "0" || st.Errors != 0 {
		t.Errorf("calls %+v, %+v; stats %+v", calls[0], calls[2], st)
	}
}

func TestDetached(t *testing.T) {
	calls, st := parseAll(t, "9 read(0</dev/null>,  <detached ...>\n")
	if len(calls) != 1 || !calls[0].Unfinished || calls[0].Name != "read" || st.Unfinished != 1 {
		t.Errorf("calls %+v, stats %+v", calls, st)
	}
}

// TestShiftInFlags: strace prints a termios speed as B2000000<<IBSHIFT; the
// "<" after a digit there is a shift, not a -y annotation (a pager's
// TCSETSW under lockstep run failed to scan, and the observed run aborted).
func TestShiftInFlags(t *testing.T) {
	const trace = `24471 ioctl(3</dev/pts/2>, SNDCTL_TMR_STOP or TCSETSW, {c_iflag=ICRNL|IXON, c_oflag=NL0|CR0|XTABS|BS0|VT0|FF0|OPOST|ONLCR, c_cflag=BOTHER|B2000000<<IBSHIFT|CS5|PARENB|0x2f90c000, c_lflag=NOFLSH|ECHOCTL|0x948a2000, ...}) = -1 EACCES (Permission denied)
`
	calls, _ := parseAll(t, trace)
	if len(calls) != 1 || len(calls[0].Args) != 3 || calls[0].Errno != "EACCES" {
		t.Fatalf("calls = %v", calls)
	}
	if fd, ok := calls[0].Args[0].FD(); !ok || fd.Path != "/dev/pts/2" {
		t.Errorf("first argument %q: want the descriptor of /dev/pts/2", calls[0].Args[0])
	}
}
