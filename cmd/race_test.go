//go:build race

package cmd_test

// raceEnabled builds the svc binary under test with the race detector too.
const raceEnabled = true
