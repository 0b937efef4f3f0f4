package audit

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/lockstep-sandbox/lockstep/landlock"
)

// Class is the kind of right a blocker names.
type Class = landlock.Class

// Blocker classes, as landlock names them.
const (
	ClassFS       = landlock.ClassFS
	ClassNet      = landlock.ClassNet
	ClassScope    = landlock.ClassScope
	ClassImplicit = landlock.ClassImplicit
)

// Blocker is one right as Landlock's audit records name it: its row of
// landlock.Rights.
type Blocker = landlock.Fact

// LookupBlocker returns the blocker named name; false for a name Linux 7.2
// does not write (a newer kernel's right, or "unknown" after a kernel WARN).
func LookupBlocker(name string) (Blocker, bool) { return landlock.Lookup(name) }

// Access is a LANDLOCK_ACCESS (1423) record: a denial. Fields the record did
// not carry are zero; the kernel omits zero ports and addresses too.
type Access struct {
	// Domain is the youngest denying domain's ID.
	Domain uint64
	// Blockers are the rights that domain lacks, in the kernel's bit order
	// (landlock.Right names them).
	Blockers []string

	// Path is the object (d_path, decoded): the file, or the parent directory
	// for make_*, remove_* and refer, the device for ioctl_dev, the hex of an
	// abstract socket's name for scope.abstract_unix_socket.
	Path string
	// Name is the dentry name of fs.change_topology on umount/remount.
	Name string
	// Dev is the superblock's s_id (vda, tmpfs, devtmpfs, overlay, …).
	Dev string
	// Ino is the inode number; HasIno tells whether the record had one.
	Ino    uint64
	HasIno bool
	// IoctlCmd is the low 16 bits of a denied ioctl command (fs.ioctl_dev).
	IoctlCmd    uint16
	HasIoctlCmd bool

	// OPid and OComm name the target task of scope.signal and ptrace.
	OPid  int
	OComm string

	// LAddr/LPort: the caller's socket's bound address; FAddr/FPort: its
	// connected peer; SAddr/Src: the address a bind asked for; DAddr/Dest: the
	// address a connect or send asked for.
	LAddr, FAddr, SAddr, DAddr netip.Addr
	LPort, FPort, Src, Dest    uint16
}

// HasBlocker reports whether name is among a's blockers.
func (a *Access) HasBlocker(name string) bool {
	for _, b := range a.Blockers {
		if b == name {
			return true
		}
	}
	return false
}

// Access decodes r as a LANDLOCK_ACCESS record.
func (r *Record) Access() (Access, error) {
	var a Access
	if r.Type != TypeLandlockAccess {
		return a, fmt.Errorf("record type %v is not LANDLOCK_ACCESS", r.Type)
	}
	var haveDomain, haveBlockers bool
	for i := 0; i < r.n; i++ {
		f := r.Field(i)
		var err error
		switch f.Key {
		case "domain":
			a.Domain, err = strconv.ParseUint(f.Value, 16, 64)
			haveDomain = true
		case "blockers":
			a.Blockers = strings.Split(f.Value, ",")
			for _, b := range a.Blockers {
				if b == "" {
					err = fmt.Errorf("empty blocker in %q", f.Value)
				}
			}
			haveBlockers = true
		default:
			err = a.setObject(f)
		}
		if err != nil {
			return Access{}, fmt.Errorf("LANDLOCK_ACCESS %s=%s: %w", f.Key, clip(f.Value), err)
		}
	}
	if !haveDomain || !haveBlockers {
		return Access{}, fmt.Errorf("LANDLOCK_ACCESS record lacks domain= or blockers= (serial %d)", r.Serial)
	}
	return a, nil
}

// setObject decodes a field that describes the denied object: a file, an
// ioctl, a process or a socket's addresses and ports. Other fields are
// left alone.
func (a *Access) setObject(f Field) error {
	var err error
	switch f.Key {
	case "path":
		a.Path, err = f.Decoded()
	case "name":
		a.Name, err = f.Decoded()
	case "dev":
		a.Dev, err = f.Decoded()
	case "ino":
		a.Ino, err = strconv.ParseUint(f.Value, 10, 64)
		a.HasIno = true
	case "ioctlcmd":
		var v uint64
		v, err = strconv.ParseUint(strings.TrimPrefix(f.Value, "0x"), 16, 16)
		a.IoctlCmd, a.HasIoctlCmd = uint16(v), true
	case "opid":
		a.OPid, err = strconv.Atoi(f.Value)
	case "ocomm":
		a.OComm, err = f.Decoded()
	case "laddr":
		a.LAddr, err = netip.ParseAddr(f.Value)
	case "faddr":
		a.FAddr, err = netip.ParseAddr(f.Value)
	case "saddr":
		a.SAddr, err = netip.ParseAddr(f.Value)
	case "daddr":
		a.DAddr, err = netip.ParseAddr(f.Value)
	case "lport":
		a.LPort, err = parsePort(f.Value)
	case "fport":
		a.FPort, err = parsePort(f.Value)
	case "src":
		a.Src, err = parsePort(f.Value)
	case "dest":
		a.Dest, err = parsePort(f.Value)
	}
	return err
}

func parsePort(s string) (uint16, error) {
	v, err := strconv.ParseUint(s, 10, 16)
	return uint16(v), err
}

// Domain statuses of a LANDLOCK_DOMAIN record.
const (
	StatusAllocated   = "allocated"
	StatusDeallocated = "deallocated"
)

// DomainStatus is a LANDLOCK_DOMAIN (1424) record.
type DomainStatus struct {
	Domain uint64
	// Status is StatusAllocated or StatusDeallocated.
	Status string
	// Allocated records: Mode ("enforcing"), the pid (tgid, initial pid
	// namespace) and uid of the task that called landlock_restrict_self,
	// and its executable and comm at that time.
	Mode      string
	Pid       int
	UID       uint32
	Exe, Comm string
	// Deallocated records: every denial counted for the domain, logged or
	// not.
	Denials uint64
}

// Domain decodes r as a LANDLOCK_DOMAIN record.
func (r *Record) Domain() (DomainStatus, error) {
	var d DomainStatus
	if r.Type != TypeLandlockDomain {
		return d, fmt.Errorf("record type %v is not LANDLOCK_DOMAIN", r.Type)
	}
	var haveDomain, haveDenials, havePid bool
	for i := 0; i < r.n; i++ {
		f := r.Field(i)
		var err error
		switch f.Key {
		case "domain":
			d.Domain, err = strconv.ParseUint(f.Value, 16, 64)
			haveDomain = true
		case "status":
			d.Status = f.Value
		case "mode":
			d.Mode = f.Value
		case "pid":
			d.Pid, err = strconv.Atoi(f.Value)
			havePid = true
		case "uid":
			var v uint64
			v, err = strconv.ParseUint(f.Value, 10, 32)
			d.UID = uint32(v)
		case "exe":
			d.Exe, err = f.Decoded()
		case "comm":
			d.Comm, err = f.Decoded()
		case "denials":
			d.Denials, err = strconv.ParseUint(f.Value, 10, 64)
			haveDenials = true
		}
		if err != nil {
			return DomainStatus{}, fmt.Errorf("LANDLOCK_DOMAIN %s=%s: %w", f.Key, clip(f.Value), err)
		}
	}
	switch {
	case !haveDomain:
		return DomainStatus{}, fmt.Errorf("LANDLOCK_DOMAIN record lacks domain= (serial %d)", r.Serial)
	case d.Status == StatusAllocated && !havePid:
		return DomainStatus{}, fmt.Errorf("LANDLOCK_DOMAIN allocated record lacks pid= (serial %d)", r.Serial)
	case d.Status == StatusDeallocated && !haveDenials:
		return DomainStatus{}, fmt.Errorf("LANDLOCK_DOMAIN deallocated record lacks denials= (serial %d)", r.Serial)
	case d.Status != StatusAllocated && d.Status != StatusDeallocated:
		return DomainStatus{}, fmt.Errorf("LANDLOCK_DOMAIN status=%q, want allocated or deallocated (serial %d)", clip(d.Status), r.Serial)
	}
	return d, nil
}

// Syscall is the part of a SYSCALL (1300) record that joins a denial to the
// call that caused it.
type Syscall struct {
	// Arch is the audit architecture, e.g. "c000003e" for x86_64.
	Arch string
	// Nr is the system call number of Arch.
	Nr int
	// Success is the kernel's success=yes|no; Exit the return value (a
	// negative errno on failure). HasExit is false when the record had none.
	Success bool
	Exit    int64
	HasExit bool
	// Pid and PPid are thread-group ids in the initial pid namespace.
	Pid, PPid int
	Comm, Exe string
}

// Syscall decodes r as a SYSCALL record.
func (r *Record) Syscall() (Syscall, error) {
	var s Syscall
	if r.Type != TypeSyscall {
		return s, fmt.Errorf("record type %v is not SYSCALL", r.Type)
	}
	var haveNr, havePid bool
	for i := 0; i < r.n; i++ {
		f := r.Field(i)
		var err error
		switch f.Key {
		case "arch":
			s.Arch = f.Value
		case "syscall":
			s.Nr, err = strconv.Atoi(f.Value)
			haveNr = true
		case "success":
			s.Success = f.Value == "yes"
		case "exit":
			s.Exit, err = strconv.ParseInt(f.Value, 10, 64)
			s.HasExit = true
		case "pid":
			s.Pid, err = strconv.Atoi(f.Value)
			havePid = true
		case "ppid":
			s.PPid, err = strconv.Atoi(f.Value)
		case "comm":
			s.Comm, err = f.Decoded()
		case "exe":
			s.Exe, err = f.Decoded()
		}
		if err != nil {
			return Syscall{}, fmt.Errorf("SYSCALL %s=%s: %w", f.Key, clip(f.Value), err)
		}
	}
	if !haveNr || !havePid {
		return Syscall{}, fmt.Errorf("SYSCALL record lacks syscall= or pid= (serial %d)", r.Serial)
	}
	return s, nil
}
