//go:build unix

package cmd

import (
	"syscall"

	"github.com/rs/zerolog"
)

// raiseFileLimit raises the soft limit on open files (RLIMIT_NOFILE) to
// the hard limit, as far as the system allows, and returns the soft limit
// in force (0 if unknown). The Go runtime does the same at start-up; doing
// it here makes it explicit and yields the limit SVC_MAX_CONNECTIONS must
// fit.
func raiseFileLimit(log zerolog.Logger) uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		log.Warn().Err(err).Msg("cannot read the open-file limit (RLIMIT_NOFILE)")
		return 0
	}
	if lim.Cur < lim.Max {
		raised := lim
		raised.Cur = raised.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
			log.Warn().Err(err).Uint64("soft", lim.Cur).Uint64("hard", lim.Max).
				Msg("cannot raise the open-file limit (RLIMIT_NOFILE) to its hard limit")
			return lim.Cur
		}
		lim = raised
	}
	return lim.Cur
}
