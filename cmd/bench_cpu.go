package cmd

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// On two cores the CPU a decision costs bounds the throughput, and unlike
// wall time it holds still on a shared VM; so each run reports it for the
// engine, its OPA and the load generator.

// userHZ is the unit of the CPU times of /proc/<pid>/stat: USER_HZ, 100 on
// every Linux architecture.
const userHZ = 100

// cpuSample is the CPU time (user + system) used so far by the engine, by
// its child processes (the supervised opa, live, or eval mode's opa evals,
// waited for), and by the load generator.
type cpuSample struct {
	engine, children, generator time.Duration
	ok                          bool // the engine's figures could be read
}

// cpuPerDecision is a run's CPU per answered decision; ok is false when
// the engine's CPU could not be read, generatorOK when the generator's was
// not measured (the bare opa eval rows).
type cpuPerDecision struct {
	engine, children, generator time.Duration
	ok, generatorOK             bool
}

// sampleCPU reads the CPU used so far by pid (0: none) and its children,
// and by this process plus extra (a generator process it ran).
func sampleCPU(pid int) cpuSample {
	s := cpuSample{generator: selfCPU()}
	if pid <= 0 {
		return s
	}
	self, ok := procCPU(pid)
	if !ok {
		return s
	}
	s.engine, s.ok = self, true
	s.children, _ = procChildrenCPU(pid) // the opa evals of eval mode, waited for
	for _, child := range childPIDs(pid) {
		if c, ok := procCPU(child); ok {
			s.children += c
		}
	}
	return s
}

// perDecision divides the CPU used between a and b over n decisions.
func perDecision(a, b cpuSample, n int) cpuPerDecision {
	if n <= 0 {
		return cpuPerDecision{}
	}
	d := time.Duration(n)
	return cpuPerDecision{
		engine:      (b.engine - a.engine) / d,
		children:    (b.children - a.children) / d,
		generator:   (b.generator - a.generator) / d,
		ok:          a.ok && b.ok,
		generatorOK: true,
	}
}

// procStatFields returns the fields of /proc/<pid>/stat after the command
// name (field 3, the state, first); nil when it cannot be read.
func procStatFields(pid int) []string {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	// The command name is in parentheses and may hold spaces and ')'.
	i := strings.LastIndexByte(string(raw), ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(raw[i+1:]))
}

// procCPU is utime + stime of pid (fields 14 and 15 of its stat).
func procCPU(pid int) (time.Duration, bool) {
	f := procStatFields(pid)
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * time.Second / userHZ, true
}

// procChildrenCPU is cutime + cstime of pid (fields 16 and 17 of its
// stat): the CPU of the children it has waited for.
func procChildrenCPU(pid int) (time.Duration, bool) {
	f := procStatFields(pid)
	if len(f) < 15 {
		return 0, false
	}
	cutime, err1 := strconv.ParseInt(f[13], 10, 64)
	cstime, err2 := strconv.ParseInt(f[14], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(cutime+cstime) * time.Second / userHZ, true
}

// childPIDs lists the live processes whose parent is pid (field 4 of their
// stat), by a scan of /proc.
func childPIDs(pid int) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	want := strconv.Itoa(pid)
	var out []int
	for _, d := range dirs {
		n, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		if f := procStatFields(n); len(f) > 1 && f[1] == want {
			out = append(out, n)
		}
	}
	return out
}

// cpuCell renders a CPU time per decision in µs, "n/a" when unknown.
func cpuCell(d time.Duration, ok bool) string {
	if !ok {
		return "n/a"
	}
	return strconv.FormatInt(d.Microseconds(), 10)
}

// generatorLine says what generated the load: wrk, with its threads at
// each concurrency, or svc bench's own client with its GOMAXPROCS; and the
// CPUs it could run on (wrk inherits svc bench's).
func generatorLine(p benchParams) string {
	var b strings.Builder
	if p.wrkBin != "" {
		b.WriteString("wrk")
		for _, n := range p.concurrency {
			threads := "threads"
			if wrkThreads(n) == 1 {
				threads = "thread"
			}
			fmt.Fprintf(&b, ", %d %s at concurrency %d", wrkThreads(n), threads, n)
		}
	} else {
		fmt.Fprintf(&b, "svc bench, GOMAXPROCS=%d", runtime.GOMAXPROCS(0))
	}
	return b.String() + ", " + cpuAffinity(procStatus(os.Getpid(), "Cpus_allowed_list"))
}

// cpuAffinity describes a Cpus_allowed_list of /proc/<pid>/status ("1",
// "0-1", "0,2-3"), "" when it could not be read.
func cpuAffinity(list string) string {
	switch {
	case list == "":
		return "CPU affinity unknown"
	case strings.ContainsAny(list, ",-"):
		return "on CPUs " + list
	}
	return "pinned to CPU " + list
}

// procTreeCPU is the CPU time used so far by pid and its live children.
func procTreeCPU(pid int) (time.Duration, bool) {
	s := sampleCPU(pid)
	return s.engine + s.children, s.ok
}
