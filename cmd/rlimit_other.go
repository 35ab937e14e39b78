//go:build !unix

package cmd

import "github.com/rs/zerolog"

// raiseFileLimit reports an unknown limit where there is no RLIMIT_NOFILE.
func raiseFileLimit(zerolog.Logger) uint64 { return 0 }
