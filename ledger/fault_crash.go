//go:build svcfault

package ledger

import (
	"bytes"
	"os"
	"syscall"
)

// crashEnv names the variable that arms the crash of the crash tests, in
// builds with the svcfault tag only: svc kills itself (SIGKILL) in the
// first batch holding a line that contains the variable's value, once the
// batch's lines are in the file and before its transaction commits.
const crashEnv = "SVCFAULT_CRASH_BEFORE_COMMIT"

func init() {
	match := os.Getenv(crashEnv)
	if match == "" {
		return
	}
	crashBeforeCommit = func(batch []*entry, file <-chan appended) {
		for _, e := range batch {
			for _, l := range e.lines {
				if bytes.Contains(l.body, []byte(match)) {
					if file != nil {
						<-file // the lines are written (and flushed, under DurabilityFull)
					}
					_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
					select {} // the signal ends the process
				}
			}
		}
	}
}
