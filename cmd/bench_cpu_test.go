package cmd

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSampleCPU measures a busy child process as the engine's child (its
// opa), and a child already waited for (an opa eval of eval mode), this
// process as the engine itself and as the generator, and splits the CPU
// used between two samples over the decisions.
func TestSampleCPU(t *testing.T) {
	child := exec.Command("sh", "-c", "while :; do :; done")
	require.NoError(t, child.Start())
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	assert.Contains(t, childPIDs(os.Getpid()), child.Process.Pid)

	before := sampleCPU(os.Getpid())
	require.True(t, before.ok)
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) { // keep this process busy too
	}
	time.Sleep(200 * time.Millisecond)
	after := sampleCPU(os.Getpid())
	per := perDecision(before, after, 10)
	require.True(t, per.ok)
	assert.Positive(t, per.engine, "this process's CPU")
	assert.Positive(t, per.children, "the busy child's CPU")
	assert.Positive(t, per.generator, "getrusage of this process")
	assert.Equal(t, (after.children-before.children)/10, per.children)

	require.NoError(t, child.Process.Kill())
	_ = child.Wait()
	reaped := sampleCPU(os.Getpid())
	assert.NotContains(t, childPIDs(os.Getpid()), child.Process.Pid)
	assert.GreaterOrEqual(t, reaped.children, after.children,
		"the busy child, waited for, still counts, as eval mode's opa evals do")

	assert.False(t, sampleCPU(0).ok, "no engine pid")
	assert.Equal(t, cpuPerDecision{}, perDecision(before, after, 0))
	_, ok := procCPU(1 << 30)
	assert.False(t, ok, "no such process")
	assert.Equal(t, "n/a", cpuCell(time.Millisecond, false))
	assert.Equal(t, "150", cpuCell(150*time.Microsecond, true))
}

// TestGeneratorLine: the footer names wrk with its threads at each
// concurrency (one per connection, at most two), or svc bench with its
// GOMAXPROCS, and the CPUs the generator could run on.
func TestGeneratorLine(t *testing.T) {
	cpus := cpuAffinity(procStatus(os.Getpid(), "Cpus_allowed_list"))
	assert.NotEqual(t, "CPU affinity unknown", cpus)
	assert.Equal(t, "wrk, 1 thread at concurrency 1, 2 threads at concurrency 2, 2 threads at concurrency 64, "+cpus,
		generatorLine(benchParams{wrkBin: "wrk", concurrency: []int{1, 2, 64}}))
	line := generatorLine(benchParams{concurrency: []int{1}})
	assert.True(t, strings.HasPrefix(line, "svc bench, GOMAXPROCS="), line)
	assert.Contains(t, line, "GOMAXPROCS="+strconv.Itoa(runtime.GOMAXPROCS(0))+", ")

	for list, want := range map[string]string{
		"1": "pinned to CPU 1", "0-1": "on CPUs 0-1", "0,2-3": "on CPUs 0,2-3", "": "CPU affinity unknown",
	} {
		assert.Equal(t, want, cpuAffinity(list), list)
	}
}
