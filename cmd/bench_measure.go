package cmd

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/rego"
)

// pct returns the q-quantile of sorted latencies (nearest rank).
func pct(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)].Round(time.Microsecond)
}

// kib renders a size in KiB as MiB, "n/a" when unknown.
func kib(kb int64) string {
	if kb < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1fMiB", float64(kb)/1024)
}

// procStatusKB reads a "<field>: <n> kB" line of /proc/<pid>/status; -1
// when it cannot.
func procStatusKB(pid int, field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return -1
		}
		return n
	}
	return -1
}

// rssSampler polls a process's resident memory during a run.
type rssSampler struct {
	done chan struct{}
	wg   sync.WaitGroup
	max  int64
}

// sampleRSS polls VmRSS of pid every 100ms until stop; pid 0 samples
// nothing.
func sampleRSS(pid int) *rssSampler {
	s := &rssSampler{done: make(chan struct{}), max: -1}
	if pid <= 0 {
		return s
	}
	s.wg.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			s.max = max(s.max, procStatusKB(pid, "VmRSS"))
			select {
			case <-s.done:
				return
			case <-t.C:
			}
		}
	})
	return s
}

// stop ends the sampling and returns the largest RSS seen, in KiB.
func (s *rssSampler) stop() int64 {
	close(s.done)
	s.wg.Wait()
	return s.max
}

// benchOPA times bare `opa eval` runs of the policy on the input the engine
// would send for an internal read: the command line of the eval-mode
// evaluator, without svc around it. Its p50 is the floor of eval mode.
func benchOPA(ctx context.Context, p benchParams, w io.Writer) error {
	dir := p.policyDir
	if dir == "" {
		d, cleanup, err := rego.Materialize()
		if err != nil {
			return fmt.Errorf("bench: write bundled policy pack: %w", err)
		}
		defer func() { _ = cleanup() }()
		dir = d
	}
	env, err := engine.ParseEnvelope(benchEnvelope(nil, benchMix[0], "bench-opa", 0, 1))
	if err != nil {
		return fmt.Errorf("bench: sample envelope: %w", err)
	}
	input, err := json.Marshal(engine.PolicyInput{Envelope: env, Cumulative: engine.Cumulative{WindowSeconds: 3600}})
	if err != nil {
		return fmt.Errorf("bench: sample input: %w", err)
	}
	took := make([]time.Duration, 0, p.opaRuns)
	for range p.opaRuns {
		cmd := exec.CommandContext(ctx, p.opaBin, "eval", "--format", "json", "--stdin-input",
			"--strict-builtin-errors", "--data", dir, "data.svc.policy.decision")
		cmd.Stdin = strings.NewReader(string(input))
		start := time.Now()
		out, err := cmd.Output()
		took = append(took, time.Since(start))
		if err != nil || !strings.Contains(string(out), `"decision"`) {
			return fmt.Errorf("bench: opa eval failed: %v: %s", err, out)
		}
	}
	slices.Sort(took)
	fmt.Fprintf(w, "\nbare opa eval (%d runs, %s): p50 %s  p90 %s  p99 %s\n", p.opaRuns, p.opaBin,
		pct(took, 0.50), pct(took, 0.90), pct(took, 0.99))
	return nil
}
