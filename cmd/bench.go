package cmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/svc-dev/svc/engine"
)

// benchParams are the settings of `svc bench`.
type benchParams struct {
	url, token, label string
	concurrency       []int
	duration          time.Duration
	sessions          int
	pid               int // svc serve's pid, for its RSS; 0 for none
	procs             int // GOMAXPROCS of the load generator; 0 keeps Go's default
	opaRuns           int
	opaBin, policyDir string
	wrkBin            string // drive the load with this wrk; "" for the built-in client
	baselineOnly      bool   // time the opa eval baseline alone, with no engine
}

func newBenchCommand() *cobra.Command {
	p := benchParams{}
	v := newViper(clientDefaults)
	c := &cobra.Command{
		Use:   "bench",
		Short: "Load a running engine with a realistic envelope mix and print latency and throughput",
		Long: "Drives POST /v1/decide of the engine at --url (default SVC_CORE_URL) from --concurrency clients for\n" +
			"--duration each, with a mix of reads, writes, outbound sends and deletes over --sessions sessions, so\n" +
			"budgets trip and holds are created. Prints p50/p90/p99 latency and decisions/s per concurrency and,\n" +
			"with --opa-runs, the same figures for a bare `opa eval` of the policy as the baseline. The last line,\n" +
			"`answered N`, counts the decisions the engine answered (each one must be in its audit log).\n" +
			"With --baseline-only, it times the baseline alone, with no engine to drive.\n" +
			"Exit code: 0 done, 1 the runs failed (engine unreachable, an unanswered decision), 64 usage error.",
		Args: argsOf(0, "no argument"),
		PreRunE: func(*cobra.Command, []string) error {
			if p.url == "" {
				p.url = strings.TrimSpace(v.GetString("core_url"))
			}
			if p.token == "" {
				p.token = strings.TrimSpace(v.GetString("core_token"))
			}
			return p.validate()
		},
		RunE: func(c *cobra.Command, _ []string) error {
			if p.procs > 0 {
				runtime.GOMAXPROCS(p.procs)
			}
			// Interrupted, the runs end and the baseline's opa processes and
			// policy copy are cleaned up, rather than left behind.
			ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if p.baselineOnly {
				return failure(runBaseline(ctx, p, c.OutOrStdout()))
			}
			return failure(runBench(ctx, p, c.OutOrStdout()))
		},
	}
	// pflag takes a usage's first `quoted` word as the placeholder of the
	// flag's value; TestFlagPlaceholders checks them.
	f := c.Flags()
	f.StringVar(&p.url, "url", "", "engine base `URL` (default SVC_CORE_URL)")
	f.StringVar(&p.token, "token", "", "bearer `token` (default SVC_CORE_TOKEN)")
	f.StringVar(&p.label, "label", "svc", "mode `label` printed in the table (eval, server)")
	f.IntSliceVar(&p.concurrency, "concurrency", []int{1, 16, 64},
		"comma-separated `counts` of concurrent clients, one run for each")
	f.DurationVar(&p.duration, "duration", 10*time.Second, "length of each run")
	f.IntVar(&p.sessions, "sessions", 1000, "`n` agent sessions the envelopes are spread over")
	f.IntVar(&p.pid, "pid", 0, "`pid` of svc serve, to report its resident memory and the CPU it and its children use (Linux)")
	f.IntVar(&p.procs, "procs", 1, "GOMAXPROCS `n` of the load generator: 1 leaves the other CPUs to an engine on the\n"+
		"same machine; 0 keeps Go's default")
	f.IntVar(&p.opaRuns, "opa-runs", 0, "`n` runs of a bare opa eval, the baseline, at each concurrency; 0 skips it")
	f.StringVar(&p.opaBin, "opa-bin", "opa", "opa binary of the baseline: a `path`, or a name looked up on PATH")
	f.StringVar(&p.wrkBin, "wrk", "", "drive the load with wrk at this `path` (or name on PATH) instead of the built-in\n"+
		"client; runs are whole seconds, and the requests in flight when each wrk run ends go uncounted")
	f.BoolVar(&p.baselineOnly, "baseline-only", false, "time only the --opa-runs baseline at each --concurrency, with no\n"+
		"engine (no --url): apart from a load generator pinned to a CPU, whose pinning opa would inherit")
	f.StringVar(&p.policyDir, "policy-dir", "", "policy pack `dir`ectory of the baseline (default: the bundled pack)")
	return c
}

func (p *benchParams) validate() error {
	if p.baselineOnly && p.opaRuns < 1 {
		return &exitError{code: exitUsage, err: errors.New("--baseline-only: set --opa-runs to the runs per concurrency")}
	}
	if _, ok := httpURL(p.url); !ok && !p.baselineOnly {
		return &exitError{code: exitUsage, err: fmt.Errorf("--url: must be the engine's http(s) base URL, got %q", redactURL(p.url))}
	}
	if p.duration <= 0 || p.sessions < 1 || p.opaRuns < 0 || p.procs < 0 {
		return &exitError{code: exitUsage, err: fmt.Errorf("--duration, --sessions must be positive and --opa-runs, --procs not negative")}
	}
	for _, n := range p.concurrency {
		if n < 1 || n > 4096 {
			return &exitError{code: exitUsage, err: fmt.Errorf("--concurrency: %d is not from 1 to 4096", n)}
		}
	}
	return nil
}

func runBench(ctx context.Context, p benchParams, w io.Writer) error {
	fmt.Fprintf(w, "svc bench: %s, %s per run, %d sessions\n\n", redactURL(p.url), p.duration, p.sessions)
	benchTableHeader(w)
	b, err := newBenchRunner(p)
	if err != nil {
		return err
	}
	defer func() { _ = b.Close() }()
	answered, inFlight := 0, 0
	for i, n := range p.concurrency {
		r, err := b.run(ctx, n, fmt.Sprintf("r%d-%d", i, time.Now().UnixNano()))
		if err != nil {
			return err
		}
		answered += r.answered
		inFlight += r.inFlight
		benchRow(w, p.label, n, r)
	}
	fmt.Fprintln(w, "\n(svc-cpu, opa-cpu, gen-cpu: CPU time per decision in µs of the engine at --pid, of its child\n"+
		"processes (its opa), and of the load generator; n/a without --pid)")
	fmt.Fprintf(w, "\nload generator: %s\n", generatorLine(p))
	if p.pid > 0 {
		fmt.Fprintf(w, "\npeak RSS of pid %d (VmHWM): %s\n", p.pid, kib(procStatusKB(p.pid, "VmHWM")))
	}
	if p.opaRuns > 0 {
		if err := benchOPA(ctx, p, w); err != nil {
			return err
		}
	}
	if p.wrkBin != "" {
		// The audit log holds from answered to answered + inFlight decisions.
		fmt.Fprintf(w, "\nin flight when wrk stopped: up to %d\n", inFlight)
	}
	fmt.Fprintf(w, "\nanswered %d\n", answered)
	return nil
}

// benchTableHeader prints the head of the table of benchRow's rows.
func benchTableHeader(w io.Writer) {
	fmt.Fprintf(w, "%-8s %5s %9s %10s %9s %9s %9s %6s %9s %6s %6s %9s %7s %7s %7s\n", "mode", "conc", "decisions",
		"decided/s", "p50", "p90", "p99", "allow", "approval", "deny", "errors", "max RSS", "svc-cpu", "opa-cpu", "gen-cpu")
}

// benchRunner runs the load at one concurrency: the built-in client or wrk.
type benchRunner interface {
	run(ctx context.Context, n int, run string) (benchResult, error)
	Close() error
}

// newBenchRunner returns wrk's runner with --wrk, else the built-in client.
func newBenchRunner(p benchParams) (benchRunner, error) {
	if p.wrkBin != "" {
		return newWrkRunner(p)
	}
	return newBenchClient(p)
}

// benchRow prints the figures of one run as a row of the table.
func benchRow(w io.Writer, label string, n int, r benchResult) {
	fmt.Fprintf(w, "%-8s %5d %9d %10.0f %9s %9s %9s %6d %9d %6d %6d %9s %7s %7s %7s\n", label, n, r.decisions(),
		float64(r.decisions())/r.elapsed.Seconds(), r.quantile(0), r.quantile(1), r.quantile(2), r.verdicts[engine.Allow], r.verdicts[engine.RequireApproval],
		r.verdicts[engine.Deny], r.errors, kib(r.maxRSS), cpuCell(r.cpu.engine, r.cpu.ok),
		cpuCell(r.cpu.children, r.cpu.ok), cpuCell(r.cpu.generator, r.cpu.generatorOK))
}

// benchResult is one run's figures; latencies are sorted.
type benchResult struct {
	latencies []time.Duration
	elapsed   time.Duration
	verdicts  map[string]int
	errors    int
	lastErr   error // the last of the errors, to explain a run without answers
	answered  int   // decisions answered, warm-up included
	maxRSS    int64 // KiB, -1 when unknown
	cpu       cpuPerDecision
	// From wrk, which gives counts and percentiles rather than latencies:
	count     int
	quantiles *[3]time.Duration // p50, p90, p99
	inFlight  int               // requests wrk may have dropped unanswered at its end
}

// decisions is the number of timed decisions.
func (r benchResult) decisions() int {
	if r.quantiles != nil {
		return r.count
	}
	return len(r.latencies)
}

// quantile returns p50, p90 or p99 (i 0, 1, 2).
func (r benchResult) quantile(i int) time.Duration {
	if r.quantiles != nil {
		return r.quantiles[i]
	}
	return pct(r.latencies, []float64{0.50, 0.90, 0.99}[i])
}

// benchClient drives the engine: over raw keep-alive connections, one per
// worker, for http://; with net/http's client for https://.
type benchClient struct {
	p      benchParams
	target *rawTarget   // nil for https://
	conns  []*rawConn   // worker i's, kept from run to run as net/http keeps its pool
	http   *http.Client // nil for http://
}

func newBenchClient(p benchParams) (*benchClient, error) {
	if strings.HasPrefix(p.url, "http://") {
		t, err := newRawTarget(p.url, p.token)
		return &benchClient{p: p, target: t}, err
	}
	return &benchClient{p: p, http: newBenchHTTP(slices.Max(p.concurrency))}, nil
}

// newBenchHTTP returns a net/http client that keeps a connection per
// worker.
func newBenchHTTP(workers int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = workers
	tr.DisableCompression = true
	return &http.Client{Transport: tr, Timeout: benchTimeout}
}

// benchDecider posts envelopes for one worker.
type benchDecider interface {
	decide(ctx context.Context, envelope []byte) (string, error)
}

// deciders returns a decider for each of n workers: its own raw
// connection, or the shared net/http client.
func (b *benchClient) deciders(n int) []benchDecider {
	out := make([]benchDecider, n)
	for i := range out {
		if b.target == nil {
			out[i] = httpDecider{b}
			continue
		}
		if i == len(b.conns) {
			b.conns = append(b.conns, newRawConn(b.target))
		}
		out[i] = b.conns[i]
	}
	return out
}

// Close closes the raw connections; it is idempotent.
func (b *benchClient) Close() error {
	var errs []error
	for _, c := range b.conns {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// run drives n clients for a warm-up, whose requests are counted as
// answered (the engine audits them) but not timed, then for the duration.
func (b *benchClient) run(ctx context.Context, n int, run string) (benchResult, error) {
	warm, err := b.drive(ctx, n, run+"w", min(time.Second, b.p.duration/5))
	if err != nil {
		return benchResult{}, err
	}
	r, err := measured(b.p.pid, func() (benchResult, error) { return b.drive(ctx, n, run, b.p.duration) })
	r.answered += warm.answered
	return r, err
}

// measured runs a timed run, sampling the resident memory of the engine at
// pid meanwhile and its CPU, its children's and the generator's before
// and after.
func measured(pid int, run func() (benchResult, error)) (benchResult, error) {
	rss := sampleRSS(pid)
	before := sampleCPU(pid)
	r, err := run()
	r.cpu = perDecision(before, sampleCPU(pid), r.decisions())
	r.maxRSS = rss.stop()
	return r, err
}

// drive runs n workers for d and merges their figures. A request in flight
// at the end is awaited, never cut off, so that every request is either
// answered or an error and the answered count can be checked against the
// audit log.
func (b *benchClient) drive(ctx context.Context, n int, run string, d time.Duration) (benchResult, error) {
	deciders := b.deciders(n)
	until := time.Now().Add(d)
	out := runWorkers(n, func(i int) benchResult { return b.worker(ctx, deciders[i], run, i, until) })
	if err := ctx.Err(); err != nil {
		return out, err
	}
	if len(out.latencies) == 0 {
		return out, b.noAnswer(d, out)
	}
	return out, nil
}

// noAnswer explains a run of d in which no decision was answered, from the
// last error a worker met: the status the engine answered with, or why no
// answer came.
func (b *benchClient) noAnswer(d time.Duration, r benchResult) error {
	var se *benchStatusError
	if !errors.As(r.lastErr, &se) {
		return fmt.Errorf("bench: no decision was answered in %s (%d errors, the last: %v); is the engine at %s?",
			d, r.errors, r.lastErr, redactURL(b.p.url))
	}
	answered := fmt.Sprintf("bench: the engine at %s answered %d %s", redactURL(b.p.url), se.status, http.StatusText(se.status))
	switch {
	case se.status == http.StatusUnauthorized && b.p.token == "":
		return fmt.Errorf("%s: set --token or SVC_CORE_TOKEN to its SVC_AUTH_TOKEN", answered)
	case se.status == http.StatusUnauthorized:
		return fmt.Errorf("%s: the token of --token or SVC_CORE_TOKEN is not its SVC_AUTH_TOKEN", answered)
	}
	return fmt.Errorf("%s, and no decision in %s (%d errors, the last: %v)", answered, d, r.errors, se.err)
}

// runWorkers runs work(i) for each of n workers at once and merges their
// figures, over the time they took.
func runWorkers(n int, work func(i int) benchResult) benchResult {
	stats := make([]benchResult, n)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { stats[i] = work(i) })
	}
	wg.Wait()
	return mergeResults(stats, time.Since(start))
}

// mergeResults sums the figures of workers into one result over elapsed,
// with sorted latencies.
func mergeResults(stats []benchResult, elapsed time.Duration) benchResult {
	out := benchResult{elapsed: elapsed, verdicts: map[string]int{}}
	for _, s := range stats {
		out.latencies = append(out.latencies, s.latencies...)
		out.errors += s.errors
		if s.lastErr != nil {
			out.lastErr = s.lastErr
		}
		out.answered += s.answered
		for k, v := range s.verdicts {
			out.verdicts[k] += v
		}
	}
	slices.Sort(out.latencies)
	return out
}

func (b *benchClient) worker(ctx context.Context, d benchDecider, run string, id int, until time.Time) benchResult {
	rng := rand.New(rand.NewPCG(uint64(id), uint64(until.UnixNano())))
	r := benchResult{verdicts: map[string]int{}}
	var body []byte
	for seq := 0; ctx.Err() == nil && time.Now().Before(until); seq++ {
		k := pickKind(rng)
		session := run + "-" + strconv.Itoa(rng.IntN(b.p.sessions))
		body = benchEnvelope(body[:0], k, session, seq, 1+rng.IntN(k.maxCount))
		start := time.Now()
		verdict, err := d.decide(ctx, body)
		took := time.Since(start)
		if err != nil {
			r.errors++
			r.lastErr = err
			continue
		}
		r.answered++
		r.latencies = append(r.latencies, took)
		r.verdicts[verdict]++
	}
	return r
}

// httpDecider posts envelopes with net/http's client, for https://.
type httpDecider struct{ b *benchClient }

// decide posts one envelope and returns the verdict, with the semantics of
// benchAnswer.
func (h httpDecider) decide(ctx context.Context, envelope []byte) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.b.p.url+"/v1/decide", bytes.NewReader(envelope))
	if err != nil {
		return "", fmt.Errorf("request to %s: the URL does not parse", redactURL(h.b.p.url))
	}
	req.Header.Set("Content-Type", "application/json")
	if h.b.p.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.b.p.token)
	}
	resp, err := h.b.http.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	var buf bytes.Buffer
	body, err := readBenchBody(resp, &buf)
	if err != nil {
		return "", err
	}
	return benchAnswer(resp.StatusCode, body)
}

// benchKind is one kind of action of the mix, with its share in percent.
type benchKind struct {
	share                     int
	verb, environment         string
	reversibility, blast, ext string
	maxCount                  int
}

// benchMix is the envelope mix: mostly reads and writes that are allowed,
// deletes and outbound sends that trip session budgets (require_approval,
// which creates a hold), and production deletes that require approval or
// are denied outright.
var benchMix = []benchKind{
	{55, "read", "staging", "reversible", "single", "internal", 5},
	{20, "update", "staging", "reversible", "scoped", "internal", 3},
	{10, "delete", "staging", "recoverable", "single", "internal", 3},
	{5, "send", "production", "irreversible", "single", "outbound", 5},
	{5, "delete", "production", "irreversible", "broad", "internal", 1},
	{5, "delete", "production", "irreversible", "systemic", "internal", 1},
}

// pickKind draws a kind of action by its share of the mix.
func pickKind(rng *rand.Rand) benchKind {
	roll := rng.IntN(100)
	for _, k := range benchMix {
		if roll < k.share {
			return k
		}
		roll -= k.share
	}
	return benchMix[0]
}

// benchEnvelope appends a JSON envelope of kind k for session to buf. It
// is built with appends rather than fmt.Appendf, which boxes every
// argument and takes twice as long (TestBenchEnvelope holds the format).
func benchEnvelope(buf []byte, k benchKind, session string, seq, count int) []byte {
	// Each session is its own agent and principal, as the mix's budgets are
	// per session: agent and principal budgets, and the locks that keep
	// them, would otherwise make one agent of the whole load.
	buf = append(buf, `{"svc_version":"0.2","agent":{"id":"bench-`...)
	buf = append(buf, session...)
	buf = append(buf, `","on_behalf_of":"human:bench-`...)
	buf = append(buf, session...)
	buf = append(buf, `","session_id":`...)
	buf = strconv.AppendQuote(buf, session)
	buf = append(buf, `},"action":{"namespace":"db","verb":`...)
	buf = strconv.AppendQuote(buf, k.verb)
	buf = append(buf, `,"ability":"db/`...)
	buf = append(buf, k.verb...)
	buf = append(buf, `"},"target":{"kind":"table","ref":"bench.t`...)
	buf = strconv.AppendInt(buf, int64(seq%50), 10)
	buf = append(buf, `","environment":`...)
	buf = strconv.AppendQuote(buf, k.environment)
	buf = append(buf, `},"params":{"seq":`...)
	buf = strconv.AppendInt(buf, int64(seq), 10)
	buf = append(buf, `},"magnitude":{"count":`...)
	buf = strconv.AppendInt(buf, int64(count), 10)
	buf = append(buf, `},"axes":{"reversibility":`...)
	buf = strconv.AppendQuote(buf, k.reversibility)
	buf = append(buf, `,"blast_radius":`...)
	buf = strconv.AppendQuote(buf, k.blast)
	buf = append(buf, `,"externality":`...)
	buf = strconv.AppendQuote(buf, k.ext)
	buf = append(buf, `},"approval":{"present":false,"hold_id":null},"context":{},"meta":{`...)
	buf = append(buf, `"timestamp":"2026-01-01T00:00:00Z","nonce":"`...)
	buf = append(buf, session...)
	buf = append(buf, '-')
	buf = strconv.AppendInt(buf, int64(seq), 10)
	return append(buf, `","signature":"stub"}}`...)
}
