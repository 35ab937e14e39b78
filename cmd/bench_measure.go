package cmd

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/envelope"
	"github.com/svc-dev/svc/engine/opa"
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
	n, err := strconv.ParseInt(strings.TrimSuffix(procStatus(pid, field), " kB"), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// procStatus reads the value of a "<field>: <value>" line of
// /proc/<pid>/status; "" when it cannot.
func procStatus(pid int, field string) string {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if ok && name == field {
			return strings.TrimSpace(value)
		}
	}
	return ""
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

// runBaseline prints the baseline alone (--baseline-only): bare opa eval
// runs at each concurrency, with no engine to drive. scripts/bench runs it
// apart from the load: the opa processes of a baseline run by svc bench
// pinned to one CPU would inherit the pinning.
func runBaseline(ctx context.Context, p benchParams, w io.Writer) error {
	fmt.Fprintf(w, "svc bench: the baseline alone\n\n")
	benchTableHeader(w)
	return benchOPA(ctx, p, w)
}

// benchOPA times bare `opa eval` runs of the policy on the input the engine
// would send for a read, at each concurrency of the engine's runs: the
// floor of eval mode. Each run is eval mode's own evaluator, so the command
// line is the engine's, without the engine around it. It prints one row per
// concurrency in the engine's table format, labelled opa-eval.
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
	env, err := envelope.ParseEnvelope(benchEnvelope(nil, benchMix[0], "bench-opa", 0, 1))
	if err != nil {
		return fmt.Errorf("bench: sample envelope: %w", err)
	}
	// The engine's own input document: the policy reads the action's words.
	input, err := engine.PolicyInputOf(env, engine.Cumulative{WindowSeconds: 3600}, false)
	if err != nil {
		return fmt.Errorf("bench: sample input: %w", err)
	}
	// As a user runs it: svc's own environment, without the GOGC svc gives
	// the opa it starts.
	eval := opa.NewEvalEvaluator(p.opaBin, dir, time.Minute).WithEnviron(os.Environ())
	fmt.Fprintf(w, "\nbaseline: bare `opa eval` of the policy (%s), %d runs per concurrency (at least 2 per client)\n",
		p.opaBin, p.opaRuns)
	for _, n := range p.concurrency {
		r, err := opaEvals(ctx, eval, input, n, max(p.opaRuns, 2*n))
		if err != nil {
			return err
		}
		benchRow(w, "opa-eval", n, r)
	}
	return nil
}

// opaEvals runs eval on input runs times from n concurrent clients. A run
// that fails counts in the errors column, as a failed request does in the
// engine's rows (on a starved machine an opa's output can stay open past
// the evaluator's WaitDelay, held by a process forked at the same time);
// the baseline fails only when no run succeeds.
func opaEvals(ctx context.Context, eval *opa.EvalEvaluator, input []byte, n, runs int) (benchResult, error) {
	var next atomic.Int64
	out := runWorkers(n, func(int) benchResult {
		r := benchResult{verdicts: map[string]int{}}
		for next.Add(1) <= int64(runs) && ctx.Err() == nil {
			t := time.Now()
			v, err := eval.Evaluate(ctx, input)
			if err != nil {
				r.errors++
				r.lastErr = err
				continue
			}
			r.latencies = append(r.latencies, time.Since(t))
			r.verdicts[v.Decision]++
		}
		return r
	})
	out.maxRSS = -1
	if len(out.latencies) == 0 && ctx.Err() == nil {
		return out, fmt.Errorf("bench: opa eval: no run succeeded (%d errors, the last: %w)", out.errors, out.lastErr)
	}
	return out, ctx.Err()
}
