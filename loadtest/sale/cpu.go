package sale

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time this process has used, user and system: how much of the machine
// the generator itself takes during a phase (0 where the platform cannot tell).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
