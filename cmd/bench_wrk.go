package cmd

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/svc-dev/svc/engine"
)

// With --wrk, the load comes from wrk, a C load generator that costs a
// fraction of the CPU of a Go one, driven by a Lua script that posts the
// same envelope mix as the raw client (TestBenchWrkEnvelopes holds the two
// to the same bytes).

//go:embed bench_wrk.lua
var wrkScript string

// wrkSummaryPrefix starts the line the script's done() prints.
const wrkSummaryPrefix = "svc-bench-wrk "

// errWrkNoAnswer is a wrk run in which no decision was answered.
var errWrkNoAnswer = errors.New("bench: wrk: no decision was answered")

// wrkRunner drives the engine with wrk runs.
type wrkRunner struct {
	p      benchParams
	script string // the Lua script, written to a temporary file
	dir    string
}

// newWrkRunner writes the Lua script, with the envelope mix, to a
// temporary directory that Close removes.
func newWrkRunner(p benchParams) (*wrkRunner, error) {
	if _, err := exec.LookPath(p.wrkBin); err != nil {
		return nil, fmt.Errorf("bench: --wrk: %w (scripts/install-test-deps installs wrk)", err)
	}
	dir, err := os.MkdirTemp("", "svc-bench-wrk-")
	if err != nil {
		return nil, fmt.Errorf("bench: wrk script: %w", err)
	}
	script := filepath.Join(dir, "bench.lua")
	if err := os.WriteFile(script, []byte(wrkMixLua()+wrkScript), 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("bench: wrk script: %w", err)
	}
	return &wrkRunner{p: p, script: script, dir: dir}, nil
}

// Close removes the script.
func (w *wrkRunner) Close() error { return os.RemoveAll(w.dir) }

// wrkMixLua renders benchMix as the Lua table the script draws from.
func wrkMixLua() string {
	var b strings.Builder
	b.WriteString("mix = {\n")
	for _, k := range benchMix {
		fmt.Fprintf(&b, "  {share=%d, verb=%q, environment=%q, reversibility=%q, blast=%q, ext=%q, max=%d},\n",
			k.share, k.verb, k.environment, k.reversibility, k.blast, k.ext, k.maxCount)
	}
	b.WriteString("}\n")
	return b.String()
}

// wrkThreads is the number of threads wrk runs n connections on: two,
// the cores of the machines the benchmark was written for, or one for one
// connection (wrk needs a connection per thread).
func wrkThreads(n int) int { return min(n, 2) }

// wrkSeconds rounds d up to wrk's whole seconds.
func wrkSeconds(d time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(d.Seconds())))) + "s"
}

// run drives n connections for a one-second warm-up, then for the duration
// (both in whole seconds, as wrk takes them). wrk drops the requests in
// flight when its time is up, so up to n decisions per wrk run may be on
// record without being counted as answered (inFlight). A warm-up without
// an answer (eval mode on a busy machine takes longer than a second per
// decision) is no error; a timed run without one is.
func (w *wrkRunner) run(ctx context.Context, n int, run string) (benchResult, error) {
	warm, err := w.drive(ctx, n, run+"w", time.Second)
	if err != nil && !errors.Is(err, errWrkNoAnswer) { // a slow engine may answer nothing in a second
		return benchResult{}, err
	}
	r, err := measured(w.p.pid, func() (benchResult, error) { return w.drive(ctx, n, run, w.p.duration) })
	r.answered += warm.answered
	r.inFlight += warm.inFlight
	return r, err
}

// drive runs wrk once and reads the summary line of its script.
func (w *wrkRunner) drive(ctx context.Context, n int, run string, d time.Duration) (benchResult, error) {
	args := []string{"-t", strconv.Itoa(wrkThreads(n)), "-c", strconv.Itoa(n), "-d", wrkSeconds(d),
		"--timeout", wrkSeconds(benchTimeout), "-s", w.script}
	if w.p.token != "" {
		args = append(args, "-H", "Authorization: Bearer "+w.p.token)
	}
	args = append(args, w.p.url+"/v1/decide", "--", run, strconv.Itoa(w.p.sessions))
	cmd := exec.CommandContext(ctx, w.p.wrkBin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return benchResult{}, fmt.Errorf("bench: wrk: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	r, err := parseWrkSummary(out)
	if err != nil {
		return r, err
	}
	r.inFlight = n
	if r.decisions() == 0 {
		return r, fmt.Errorf("%w in %s (%d errors); is the engine at %s?", errWrkNoAnswer, d, r.errors, redactURL(w.p.url))
	}
	return r, nil
}

// parseWrkSummary reads the script's summary line: key=value pairs of
// counts and latency percentiles in µs.
func parseWrkSummary(out []byte) (benchResult, error) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), wrkSummaryPrefix)
		if !ok {
			continue
		}
		v := map[string]int64{}
		for _, f := range strings.Fields(line) {
			key, val, _ := strings.Cut(f, "=")
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil {
				return benchResult{}, fmt.Errorf("bench: wrk summary %q: %s is not a number", line, key)
			}
			v[key] = n
		}
		us := func(k string) time.Duration { return time.Duration(v[k]) * time.Microsecond }
		r := benchResult{
			verdicts: map[string]int{engine.Allow: int(v["allow"]), engine.RequireApproval: int(v["approval"]),
				engine.Deny: int(v["deny"])},
			elapsed:   us("duration"),
			errors:    int(v["errors"]),
			quantiles: &[3]time.Duration{us("p50"), us("p90"), us("p99")},
		}
		r.count = int(v["allow"] + v["approval"] + v["deny"])
		r.answered = r.count
		return r, nil
	}
	return benchResult{}, fmt.Errorf("bench: wrk printed no %q line: %s", strings.TrimSpace(wrkSummaryPrefix), out)
}
