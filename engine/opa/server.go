package opa

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/svc-dev/svc/engine"
)

const (
	// opaRestartMin and opaRestartMax bound the backoff between restarts of
	// a supervised server that keeps dying.
	opaRestartMin = 100 * time.Millisecond
	opaRestartMax = 5 * time.Second
	// opaStableAfter is how long a server must have served for its death
	// to reset the backoff.
	opaStableAfter = 10 * time.Second
	// opaReadyTimeout bounds how long a starting server may take to answer
	// GET /health before it is killed and started again.
	opaReadyTimeout = 30 * time.Second
	// opaReadyPoll is the interval of the readiness probes.
	opaReadyPoll = 10 * time.Millisecond
	// opaLivenessInterval is the interval of the health checks of a serving
	// server, and opaLivenessMisses how many failures in a row (each bounded
	// by opaProbeTimeout) mark it wedged: it is then killed and restarted,
	// about 5 s after it stopped answering.
	opaLivenessInterval = time.Second
	opaLivenessMisses   = 3
	// opaMaxSocketPath is the longest unix socket path Linux accepts.
	opaMaxSocketPath = 107
)

// errOPADown is the answer of a supervised server that is not running.
var errOPADown = errors.New("opa server is not running; decisions are denied until it is restarted")

// OPAServerConfig configures a supervised `opa run --server`.
type OPAServerConfig struct {
	Bin       string        // opa binary: a path, or a name looked up on PATH
	PolicyDir string        // policy and data files the server loads
	Watch     bool          // reload PolicyDir when its files change (opa run --watch); without, PolicyDir must not change (precompute)
	Timeout   time.Duration // bound of one decision query
	Logger    zerolog.Logger

	liveness time.Duration              // interval of the health checks; 0 is opaLivenessInterval
	probe    func(context.Context) bool // the health check; nil is GET /health within opaProbeTimeout
}

// OPAServer is the engine.Evaluator backed by an `opa run --server` that svc starts
// and supervises: the server listens on a unix socket in a private
// directory and runs in its own process group; when it dies, every decision
// is denied at once until it has been restarted (with exponential backoff)
// and answers its health check again. A server that stops answering its
// health checks while running (wedged) is killed and restarted the same
// way. It is never an allow without an evaluation.
type OPAServer struct {
	cfg   OPAServerConfig
	dir   string // private directory: the socket, opaBatchModule, the precomputed values
	sock  string
	rest  *RESTEvaluator
	batch *batcher
	up    atomic.Bool
	pid   atomic.Int64 // of the running (or last) server process
	// answered counts the queries the server has answered with verdicts:
	// one since the last health check proves it alive (watch).
	answered atomic.Uint64

	// stale is the error of the last reload of the pack under Watch,
	// while the server keeps the previous pack; nil when the pack in force
	// is the one on disk (PackStatus).
	stale atomic.Pointer[string]

	mu      sync.Mutex
	lastErr error         // why the last server process ended; nil once one is ready
	changed chan struct{} // closed and replaced when the server becomes ready or ends

	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

var _ engine.Evaluator = (*OPAServer)(nil)

// StartOPAServer starts supervising an opa server and returns at once; use
// Check to wait until it serves. The server lives until Close, not until a
// context ends, so that decisions in flight during a graceful shutdown are
// still evaluated.
func StartOPAServer(cfg OPAServerConfig) (*OPAServer, error) {
	dir, err := os.MkdirTemp("", "svc-opa-")
	if err != nil {
		return nil, fmt.Errorf("create opa server directory: %w", err)
	}
	sock := filepath.Join(dir, "opa.sock")
	if len(sock) > opaMaxSocketPath {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("opa server socket path %s is longer than %d bytes: set TMPDIR to a shorter directory", sock, opaMaxSocketPath)
	}
	if err := writeBatchModule(dir); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &OPAServer{
		cfg: cfg, dir: dir, sock: sock,
		rest:    newUnixRESTEvaluator(sock, cfg.Timeout),
		changed: make(chan struct{}),
		cancel:  cancel,
		done:    make(chan struct{}),
	}
	s.batch = newBatcher(s.evaluate, max(2, runtime.NumCPU()), opaBatchMax, cfg.Timeout)
	go s.supervise(ctx)
	return s, nil
}

// writeBatchModule writes opaBatchModule to dir/batch, the directory of
// svc's own files that the server loads besides the policy pack (with the
// precomputed values, precompute).
func writeBatchModule(dir string) error {
	if err := writeOwnFile(filepath.Join(dir, "batch", "batch.rego"), []byte(opaBatchModule)); err != nil {
		return fmt.Errorf("write opa batch module: %w", err)
	}
	return nil
}

// Evaluate asks the running server for data.svc.policy.decision on input,
// in one batch query with the decisions of concurrent callers when the
// server is busy (see batcher); it fails at once while the server is down.
func (s *OPAServer) Evaluate(ctx context.Context, input json.RawMessage) (engine.Verdict, error) {
	return s.batch.Evaluate(ctx, input)
}

// evaluate is the batcher's sender. A lone input is one plain query. When
// the server answers a batch query with an error (a built-in error under
// strict-builtin-errors in one input's evaluation fails the whole query),
// each input is decided alone (evaluateEach), so that the fault denies only
// the decision that caused it, exactly as without batching; the fallback
// shares the batch's deadline (ctx) and is logged. A server that does not answer fails the whole
// batch.
func (s *OPAServer) evaluate(ctx context.Context, inputs []json.RawMessage) []batchResult {
	if !s.up.Load() {
		return failAll(len(inputs), fmt.Errorf("evaluate %s: %w", opaQuery, errOPADown))
	}
	if len(inputs) == 1 {
		v, err := s.rest.Evaluate(ctx, inputs[0])
		if err == nil {
			s.answered.Add(1)
		}
		return []batchResult{{verdict: v, err: err}}
	}
	results, err := s.rest.evaluateBatch(ctx, inputs)
	var answered *opaAnswerError
	switch {
	case err == nil:
		s.answered.Add(1)
		return results
	case !errors.As(err, &answered) && !errors.Is(err, errPolicyUndefined):
		return failAll(len(inputs), err)
	}
	s.cfg.Logger.Warn().Err(err).Int("inputs", len(inputs)).Msg("opa server refused a batch query: deciding its inputs one by one")
	return s.evaluateEach(ctx, inputs)
}

// evaluateEach decides each input in its own query, all at once, within
// ctx, so that the fallback of a failed batch costs one round of queries
// rather than one after another.
func (s *OPAServer) evaluateEach(ctx context.Context, inputs []json.RawMessage) []batchResult {
	results := make([]batchResult, len(inputs))
	var wg sync.WaitGroup
	for i, in := range inputs {
		wg.Go(func() { results[i].verdict, results[i].err = s.rest.Evaluate(ctx, in) })
	}
	wg.Wait()
	return results
}

// Check is the start-up probe: the server starts and answers within
// opaReadyTimeout (an opa that exits first, e.g. on a policy that does not
// compile, fails the check with what it printed), and the policy yields a
// valid verdict for a small sample input.
func (s *OPAServer) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, opaReadyTimeout)
	defer cancel()
	for !s.up.Load() {
		s.mu.Lock()
		err, changed := s.lastErr, s.changed
		s.mu.Unlock()
		if s.up.Load() {
			break
		}
		if err != nil {
			return err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("opa server did not become ready: %w", ctx.Err())
		}
	}
	if err := probe(ctx, s); err != nil {
		return fmt.Errorf("policy in %s does not compile or yields no decision: %w", s.cfg.PolicyDir, err)
	}
	if err := s.probeBatch(ctx); err != nil {
		return fmt.Errorf("batch module beside the policy in %s: %w", s.cfg.PolicyDir, err)
	}
	return nil
}

// probeBatch checks that a batch query answers, so that a broken batch
// module (which would send every batch to evaluateEach) stops start-up.
func (s *OPAServer) probeBatch(ctx context.Context) error {
	input, err := json.Marshal(probeInput())
	if err != nil {
		return fmt.Errorf("encode probe input: %w", err)
	}
	results, err := s.rest.evaluateBatch(ctx, []json.RawMessage{input, input})
	if err != nil {
		return err
	}
	for _, r := range results {
		if r.err != nil {
			return r.err
		}
	}
	return nil
}

// Close stops supervising, kills the server's process group, waits for it
// and removes its socket directory. It is idempotent.
func (s *OPAServer) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		<-s.done
		_ = s.rest.Close()
		if err := os.RemoveAll(s.dir); err != nil {
			s.closeErr = fmt.Errorf("remove opa server directory: %w", err)
		}
	})
	return s.closeErr
}

// supervise runs the server until ctx ends, restarting it with backoff.
func (s *OPAServer) supervise(ctx context.Context) {
	defer close(s.done)
	s.precompute(ctx)
	if ctx.Err() != nil {
		return
	}
	backoff := opaRestartMin
	for {
		started := time.Now()
		served, err := s.runOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if served && time.Since(started) >= opaStableAfter {
			backoff = opaRestartMin
		}
		s.cfg.Logger.Error().Err(err).Dur("restart_in", backoff).
			Msg("opa server down: decisions are denied until it is back")
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, opaRestartMax)
	}
}

// runOnce starts one server process, marks it ready once it answers, and
// waits for it to end (killing it when ctx ends or it never becomes ready).
// It reports whether the process served and why it ended.
func (s *OPAServer) runOnce(ctx context.Context) (served bool, err error) {
	_ = os.Remove(s.sock) // left behind by a killed predecessor
	out := &opaServerOutput{log: s.cfg.Logger, tail: opaOutputTail, reloaded: s.reloaded}
	cmd := exec.Command(s.cfg.Bin, s.args()...)
	cmd.Env = opaEnv(os.Environ())
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = opaProcAttr()
	cmd.WaitDelay = opaWaitDelay
	if err := cmd.Start(); err != nil {
		err = fmt.Errorf("start opa server %q: %w", s.cfg.Bin, err)
		s.ended(err)
		return false, err
	}
	pid := cmd.Process.Pid
	s.pid.Store(int64(pid))
	s.cfg.Logger.Info().Int("pid", pid).Str("socket", s.sock).Msg("opa server started")
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	wedged := false
	if s.awaitReady(ctx, exited) {
		served = true
		s.ready(pid)
		wedged = s.watch(ctx, exited)
	}
	killed := false
	select {
	case <-exited:
	default:
		killed = true
		_ = killProcessGroup(pid)
		<-exited
	}
	switch {
	case ctx.Err() != nil:
		err = ctx.Err()
	case wedged:
		err = fmt.Errorf("opa server (pid %d) stopped answering its health checks (%d in a row failed): killed",
			pid, opaLivenessMisses)
	case killed:
		err = fmt.Errorf("opa server (pid %d) did not answer its health check within %s", pid, opaReadyTimeout)
	default:
		err = fmt.Errorf("opa server (pid %d) exited: %v: %s", pid, waitErr, out.snippet())
	}
	s.ended(err)
	return served, err
}

// opaGCPercent is the GOGC of the opa processes svc starts unless svc's
// environment sets one: a server's query allocates a parse of its input and
// an evaluation that die at once, an `opa eval` the compile of the pack,
// and collecting four times less often cut the server's CPU per decision by
// about a fifth, and an `opa eval`'s by about as much (docs/performance.md).
const opaGCPercent = "400"

// opaEnv is the environment of an opa svc starts: svc's own, with
// GOGC=opaGCPercent added when it has none.
func opaEnv(env []string) []string {
	for _, kv := range env {
		if strings.HasPrefix(kv, "GOGC=") {
			return env
		}
	}
	return append(env, "GOGC="+opaGCPercent)
}

// args are the opa command line: the server on the private socket, offline,
// loading the policy pack. Info logs report reloads under --watch (a pack
// that fails to reload is reported there, and the last good one stays in
// force); the per-request access logs go to debug, which is not printed.
func (s *OPAServer) args() []string {
	args := []string{"run", "--server", "--addr", "unix://" + s.sock, "--unix-socket-perm", "600",
		"--log-level", "info", "--log-level-request", "debug", "--skip-version-check"}
	if s.cfg.Watch {
		args = append(args, "--watch")
	}
	return append(args, s.cfg.PolicyDir, filepath.Join(s.dir, "batch"))
}

// awaitReady polls GET /health until the server answers, it exits, ctx ends
// or opaReadyTimeout passes.
func (s *OPAServer) awaitReady(ctx context.Context, exited <-chan struct{}) bool {
	deadline := time.NewTimer(opaReadyTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(opaReadyPoll)
	defer tick.Stop()
	for {
		if s.rest.healthy(ctx, min(s.cfg.Timeout, opaProbeTimeout)) {
			return true
		}
		select {
		case <-exited:
			return false
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return false
		case <-tick.C:
		}
	}
}

// watch checks a serving server's health until it exits or ctx ends, and
// reports true as soon as opaLivenessMisses checks in a row have failed. A
// query answered since the last tick counts as a check passed, without a
// probe: a server busy with decisions may be slow to answer GET /health,
// and is alive all the same.
func (s *OPAServer) watch(ctx context.Context, exited <-chan struct{}) bool {
	every := s.cfg.liveness
	if every <= 0 {
		every = opaLivenessInterval
	}
	healthy := s.cfg.probe
	if healthy == nil {
		// Not bounded by the decision timeout: a loaded server may answer
		// slower than a tight SVC_OPA_TIMEOUT and still be alive.
		healthy = func(ctx context.Context) bool { return s.rest.healthy(ctx, opaProbeTimeout) }
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	misses, seen := 0, s.answered.Load()
	for {
		select {
		case <-exited:
			return false
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
		if n := s.answered.Load(); n != seen {
			misses, seen = 0, n
			continue
		}
		if healthy(ctx) {
			misses = 0
			continue
		}
		if misses++; misses >= opaLivenessMisses {
			return true
		}
	}
}

// PackStatus reports whether the policy pack in force is stale: under
// Watch, an edit of the pack failed to load (it does not compile, say),
// and the server keeps deciding with the pack it had; err is opa's load
// error. It turns fresh when a later edit loads, or a restarted server
// loads the pack on disk.
func (s *OPAServer) PackStatus() (stale bool, err error) {
	if e := s.stale.Load(); e != nil {
		return true, errors.New(*e)
	}
	return false, nil
}

// reloaded records the outcome of a reload of the pack under Watch, and
// logs a failed one as making the pack stale.
func (s *OPAServer) reloaded(loadErr string) {
	if loadErr == "" {
		if s.stale.Swap(nil) != nil {
			s.cfg.Logger.Info().Str("policy_dir", s.cfg.PolicyDir).Msg("policy pack reloaded: no longer stale")
		}
		return
	}
	s.stale.Store(&loadErr)
	s.cfg.Logger.Error().Str("policy_dir", s.cfg.PolicyDir).Str("load_error", loadErr).
		Msg("policy pack stale: an edit failed to load; decisions still use the previous pack")
}

// ready marks the server up and wakes Check; a server just started has
// loaded the pack on disk, so the pack is not stale.
func (s *OPAServer) ready(pid int) {
	s.stale.Store(nil)
	s.up.Store(true)
	s.notify(nil)
	s.cfg.Logger.Info().Int("pid", pid).Msg("opa server ready")
}

// ended marks the server down, so that decisions fail at once, and drops
// the connections to the dead process.
func (s *OPAServer) ended(err error) {
	s.up.Store(false)
	s.rest.client.CloseIdleConnections()
	s.notify(err)
}

func (s *OPAServer) notify(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastErr = err
	close(s.changed)
	s.changed = make(chan struct{})
}
