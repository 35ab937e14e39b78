//go:build unix

package cmd

import (
	"syscall"
	"time"
)

// selfCPU is the CPU time (user + system) this process and the children it
// has waited for (a wrk it ran) have used so far.
func selfCPU() time.Duration {
	var total time.Duration
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if syscall.Getrusage(who, &ru) != nil {
			continue
		}
		total += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return total
}
