//go:build !unix

package strace

import "time"

// cpuTime is unknown here; the MB/cpu-s metric is then left out.
func cpuTime() time.Duration { return 0 }
