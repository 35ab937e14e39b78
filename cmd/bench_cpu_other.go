//go:build !unix

package cmd

import "time"

// selfCPU is not measured outside Unix; the generator's column reads 0.
func selfCPU() time.Duration { return 0 }
