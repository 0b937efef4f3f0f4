package landlock

// Kind says how a system call's object and rights are read from its
// arguments.
type Kind uint8

// The kinds of system calls Landlock can refuse.
const (
	// KindPath names a path (Dir, Path); Rights, or the first Variant whose
	// flag argument Flags carries, are checked on Object.
	KindPath Kind = iota + 1
	// KindOpen opens a path (Dir, Path); its flags (argument Flags, field
	// FlagsField of it, or ImpliedFlags) decide the rights: read_file or
	// read_dir to read, write_file to write, truncate for O_TRUNC, make_reg
	// on the parent to create.
	KindOpen
	// KindMove renames or links the path (Dir, Path) to (Dir2, Path2):
	// refer on both parents across directories, else remove_* on the
	// source's parent (a rename) and make_* on the destination's, the
	// rights of the moved object's kind. Flags holds RENAME_EXCHANGE.
	KindMove
	// KindFD acts on the file of descriptor argument 0: Rights on it.
	KindFD
	// KindAddr sends to, connects to or binds the socket address argument
	// Addr: TCP or UDP by the socket's transport, or, for a pathname UNIX
	// socket, Rights on Object.
	KindAddr
)

// Object is where a right of a call is checked.
type Object uint8

// The objects.
const (
	// Named is the file the path names.
	Named Object = iota + 1
	// Parent is the directory holding it: making and removing are checked
	// there.
	Parent
)

// Variant is the rights a call needs when its flag argument carries Flag.
type Variant struct {
	Flag   string
	Rights []Right
}

// Syscall is what Landlock checks for one system call, and where the
// arguments that decide it are (0-based, as strace prints them).
type Syscall struct {
	Kind Kind
	// Op names the operation for a refusal: read, write, create, delete,
	// truncate, execute, rename, link, ioctl; empty for KindAddr (the
	// call's own name) and KindOpen (the flags decide).
	Op string
	// Dir is the directory descriptor argument a relative Path resolves
	// against; -1: the working directory. Dir2 and Path2 are the
	// destination's (KindMove).
	Dir, Path, Dir2, Path2 int
	// Flags is the argument whose flags decide (-1: none); FlagsField the
	// field of it that holds them (openat2's struct open_how);
	// ImpliedFlags what the call means when it has no flags (creat).
	Flags        int
	FlagsField   string
	ImpliedFlags string
	// Addr is the socket address argument (KindAddr).
	Addr int
	// Rights are checked on Object: the filesystem rights of the call
	// (KindPath, KindFD) or of a pathname UNIX socket (KindAddr).
	Rights   []Right
	Object   Object
	Variants []Variant
	// TCP and UDP are the network right a KindAddr call needs on a socket
	// of that transport.
	TCP, UDP Right
}

// path is a KindPath call charged to object o of the path argument p
// (directory descriptor d).
func path(op string, d, p int, o Object, rights ...Right) Syscall {
	return Syscall{Kind: KindPath, Op: op, Dir: d, Path: p, Flags: -1, Object: o, Rights: rights}
}

// withFlags sets the flag argument and the variants it picks.
func (s Syscall) withFlags(arg int, v ...Variant) Syscall {
	s.Flags, s.Variants = arg, v
	return s
}

func open(d, p, flags int) Syscall {
	return Syscall{Kind: KindOpen, Dir: d, Path: p, Flags: flags, Object: Named}
}

func move(op string, d, p, d2, p2 int) Syscall {
	return Syscall{Kind: KindMove, Op: op, Dir: d, Path: p, Dir2: d2, Path2: p2, Flags: 4, Object: Parent}
}

// addr is a KindAddr call: tcp and udp on an INET socket, unix on a
// pathname UNIX socket's object o.
func addr(a int, tcp, udp, unix Right, o Object) Syscall {
	return Syscall{Kind: KindAddr, Addr: a, TCP: tcp, UDP: udp, Rights: []Right{unix}, Object: o, Flags: -1}
}

var mknodModes = []Variant{
	{"S_IFCHR", []Right{MakeChar}}, {"S_IFBLK", []Right{MakeBlock}},
	{"S_IFIFO", []Right{MakeFifo}}, {"S_IFSOCK", []Right{MakeSock}},
}

var removeDir = Variant{"AT_REMOVEDIR", []Right{RemoveDir}}

// Syscalls maps each system call Landlock can refuse to what it checks
// (security/landlock/fs.c and net.c hooks). An execve needs read_file
// besides execute: the kernel opens the binary to read it.
var Syscalls = map[string]Syscall{
	"open":    open(-1, 0, 1),
	"openat":  open(0, 1, 2),
	"openat2": {Kind: KindOpen, Dir: 0, Path: 1, Flags: 2, FlagsField: "flags", Object: Named},
	"creat":   {Kind: KindOpen, Dir: -1, Path: 0, Flags: -1, ImpliedFlags: "O_WRONLY|O_CREAT|O_TRUNC", Object: Named},

	"mkdir":     path("create", -1, 0, Parent, MakeDir),
	"mkdirat":   path("create", 0, 1, Parent, MakeDir),
	"mknod":     path("create", -1, 0, Parent, MakeReg).withFlags(1, mknodModes...),
	"mknodat":   path("create", 0, 1, Parent, MakeReg).withFlags(2, mknodModes...),
	"symlink":   path("create", -1, 1, Parent, MakeSym),
	"symlinkat": path("create", 1, 2, Parent, MakeSym),
	"unlink":    path("delete", -1, 0, Parent, RemoveFile),
	"unlinkat":  path("delete", 0, 1, Parent, RemoveFile).withFlags(2, removeDir),
	"rmdir":     path("delete", -1, 0, Parent, RemoveDir),
	"truncate":  path("truncate", -1, 0, Named, Truncate),
	"execve":    path("execute", -1, 0, Named, Execute, ReadFile),
	"execveat":  path("execute", 0, 1, Named, Execute, ReadFile),

	"rename":    move("rename", -1, 0, -1, 1),
	"renameat":  move("rename", 0, 1, 2, 3),
	"renameat2": move("rename", 0, 1, 2, 3),
	"link":      move("link", -1, 0, -1, 1),
	"linkat":    move("link", 0, 1, 2, 3),

	"ftruncate": {Kind: KindFD, Op: "truncate", Flags: -1, Object: Named, Rights: []Right{Truncate}},
	"ioctl":     {Kind: KindFD, Op: "ioctl", Flags: -1, Object: Named, Rights: []Right{IoctlDev}},

	"bind":     addr(1, BindTCP, BindUDP, MakeSock, Parent),
	"connect":  addr(1, ConnectTCP, ConnectSendUDP, ResolveUnix, Named),
	"sendto":   addr(4, ConnectTCP, ConnectSendUDP, ResolveUnix, Named),
	"sendmsg":  addr(1, ConnectTCP, ConnectSendUDP, ResolveUnix, Named),
	"sendmmsg": addr(1, ConnectTCP, ConnectSendUDP, ResolveUnix, Named),
}
