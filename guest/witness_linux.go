package guest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/lockstep-sandbox/lockstep/guest/proto"
)

// witness describes the guest when the job (pid) died by signal sig: its
// pid, the job's own CPU time and peak memory, the kernel's count of OOM
// kills since boot, the memory left, and the last PID handed out (beside
// the job's pid, whether a remembered pid could have wrapped onto one of
// its threads). A kill that nobody logged (a
// SIGKILL with no OOM-killer line) then still says whether memory, a CPU
// limit or PID reuse was near, which the exit status alone cannot.
func witness(pid int, sig syscall.Signal, ru *syscall.Rusage) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%ssignal=%d (%s) job_pid=%d", proto.SignaledPrefix, int(sig), sig, pid)
	if ru != nil {
		fmt.Fprintf(&b, " job_user_s=%.2f job_sys_s=%.2f job_maxrss_kb=%d",
			tvSeconds(ru.Utime), tvSeconds(ru.Stime), ru.Maxrss)
	}
	fmt.Fprintf(&b, " oom_kill=%s", field("/proc/vmstat", "oom_kill"))
	fmt.Fprintf(&b, " mem_available_kb=%s mem_total_kb=%s",
		strings.TrimSuffix(field("/proc/meminfo", "MemAvailable:"), " kB"),
		strings.TrimSuffix(field("/proc/meminfo", "MemTotal:"), " kB"))
	// /proc/loadavg's last field is the PID last handed out (ns_last_pid
	// needs CONFIG_CHECKPOINT_RESTORE, which the pinned kernel lacks).
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(la)); len(f) == 5 {
			fmt.Fprintf(&b, " last_pid=%s", f[4])
		}
	}
	return b.String()
}

func tvSeconds(tv syscall.Timeval) float64 {
	return float64(tv.Sec) + float64(tv.Usec)/1e6
}

// field returns the rest of the first line of file whose first word is key,
// or "?" when there is none.
func field(file, key string) string {
	data, err := os.ReadFile(file)
	if err != nil {
		return "?"
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}
