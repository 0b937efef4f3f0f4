package attribute

import (
	"strconv"
	"strings"

	"github.com/lockstep-sandbox/lockstep/evidence/strace"
	"github.com/lockstep-sandbox/lockstep/landlock"
)

// ptyRequests are the pseudo-terminal ioctls the control replay can
// repeat on a fresh pair.
var ptyRequests = map[string]bool{
	"TIOCGPTN": true, "TIOCSPTLCK": true, "TCGETS": true, "TCSETS": true, "TCSETSW": true,
	"TCSETSF": true, "TIOCGWINSZ": true, "TIOCSWINSZ": true,
}

func isPty(p string) bool {
	if p == "/dev/ptmx" || p == "/dev/pts/ptmx" {
		return true
	}
	if n, ok := strings.CutPrefix(p, "/dev/pts/"); ok {
		_, err := strconv.Atoi(n)
		return err == nil
	}
	return false
}

// ioctlRequest is the request of an ioctl on p by the one name it has
// there. strace prints every name its tables give the request's number,
// joined by " or " (0x5403 is "SNDCTL_TMR_STOP or TCSETSW": the OSS
// sequencer's timer stop and the terminal's set-after-drain, which less
// sends to /dev/tty); the descriptor's type decides which is meant: on a
// pseudo-terminal, the terminal's request.
func ioctlRequest(req, p string) string {
	if !isPty(p) || !strings.Contains(req, " or ") {
		return req
	}
	for _, alt := range strings.Split(req, " or ") {
		if ptyRequests[alt] {
			return alt
		}
	}
	return req
}

// ioctl attributes an ioctl on the device at p: lockstep grants ioctl_dev
// only for the pseudo-terminal requests the control replay can repeat.
func (a *Attributor) ioctl(c *strace.Call, p string) *Refusal {
	req := ioctlRequest(string(argAt(c, 1)), p)
	if isPty(p) && ptyRequests[req] {
		r := fsRefusal("ioctl", NewNeed(p, landlock.IoctlDev))
		r.Detail = req
		return r
	}
	r := fixed("ioctl", "a device ioctl (%s on %s) is granted only for the pseudo-terminal requests the control can repeat", req, p)
	r.Detail = req
	r.Paths = []string{p}
	return r
}
