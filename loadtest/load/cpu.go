package load

import (
	"syscall"
	"time"
)

// SelfCPU is the CPU time this process has used, user and system: what a generator takes of
// the machine over a run is the difference of two readings (0 where the platform cannot tell).
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
