// Command floor is the least a decision server can do on this machine with
// OPA as a separate process: it answers POST /v1/decide by querying svc's own
// supervised `opa run --server` (the same evaluator, batching included, and
// the same policy pack) and, with --log, appending the decision to a file
// first, flushed to disk with one fsync per group of concurrent answers
// unless --no-sync. It parses and canonicalises the envelope into svc's own
// policy input (envelope.ParseEnvelope, engine.PolicyInputOf with an empty
// session history), as the policy reads the action's words, which only
// parsing gives. It has nothing else: no envelope hash, no ledger or
// budgets, holds, SQLite, auth or metrics.
//
// scripts/bench drives it with the same load generator and envelope mix as
// svc (modes "floor" and "floor-os"), so svc's server-mode figures can be
// read against what any design with an external OPA and a durable audit
// line per answer can reach here (docs/performance.md). It is a measuring
// tool, not part of svc.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/envelope"
	"github.com/svc-dev/svc/engine/opa"
	"github.com/svc-dev/svc/rego"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}

// run starts the opa server and serves until SIGINT or SIGTERM; a signal
// during start-up stops it too, with the opa server closed.
func run() error {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	opaBin := flag.String("opa-bin", "opa", "opa binary")
	logPath := flag.String("log", "", "decision log to append to (none: answer without writing)")
	noSync := flag.Bool("no-sync", false, "append the log without flushing it to disk")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	s := &server{}
	if *logPath != "" {
		f, err := openDecisionLog(*logPath)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		s.log = newDecisionLog(f, !*noSync)
	}
	pack, cleanup, err := rego.Materialize()
	if err != nil {
		return fmt.Errorf("materialize policy pack: %w", err)
	}
	defer func() { _ = cleanup() }()
	ev, err := opa.StartOPAServer(opa.OPAServerConfig{
		Bin: *opaBin, PolicyDir: pack, Timeout: opaTimeout, Logger: zerolog.Nop(),
	})
	if err != nil {
		return fmt.Errorf("start opa server: %w", err)
	}
	defer func() { _ = ev.Close() }()
	checkCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := ev.Check(checkCtx); err != nil {
		return fmt.Errorf("opa server: %w", err)
	}
	s.ev = ev
	return serve(ctx, *addr, s)
}

// opaTimeout bounds one evaluation, as SVC_OPA_TIMEOUT's default does in svc.
const opaTimeout = 10 * time.Second

// openDecisionLog opens path for appending. Unlike svc's audit log it does
// not flush the directory of a log it creates: that happens once, off the
// path of every answer, so it would not change a figure.
func openDecisionLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open decision log: %w", err)
	}
	return f, nil
}

// serve answers on addr until ctx ends, then lets the requests in flight
// finish; it prints the address it listens on for scripts/bench.
func serve(ctx context.Context, addr string, s *server) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/decide", s.decide)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		<-ctx.Done()
		_ = srv.Shutdown(context.Background())
	}()
	fmt.Fprintf(os.Stderr, "floor serving on http://%s\n", ln.Addr())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	<-drained
	return nil
}

// evaluator is svc's policy evaluator, as floor uses it.
type evaluator interface {
	Evaluate(ctx context.Context, input json.RawMessage) (engine.Verdict, error)
}

// server answers decisions with the evaluator alone.
type server struct {
	ev  evaluator
	log *decisionLog // nil: nothing written
	ids atomic.Uint64
}

// decide evaluates the envelope with an empty session history, logs the
// verdict and answers it; an envelope that does not parse is a 400, a
// failed evaluation or write a 500. The input document is svc's own
// (engine.PolicyInputOf of the parsed envelope): the policy reads the
// action's words and canonical values, which only parsing gives, and an
// input without them would be denied early, cheaper than any real decision.
func (s *server) decide(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	env, err := envelope.ParseEnvelope(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	input, err := engine.PolicyInputOf(env, engine.Cumulative{WindowSeconds: 3600}, false)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	v, err := s.ev.Evaluate(r.Context(), input)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	id := strconv.FormatUint(s.ids.Add(1), 10)
	answer, err := json.Marshal(map[string]string{"decision_id": id, "decision": v.Decision, "rule": v.Rule})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if s.log != nil {
		if err := s.log.append(body, v); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(answer)
}

// decisionLog appends one JSON line per decision and, with fsync, returns
// only once the line is on disk: one caller flushes for every line written
// before its flush began (group commit), the others wait for it.
type decisionLog struct {
	f     *os.File
	fsync bool
	sync  func() error // flushes f to disk

	mu       sync.Mutex
	flushed  *sync.Cond // broadcast when a flush ends
	written  uint64     // lines written
	durable  uint64     // lines known to be on disk
	flushing bool
	err      error // the first failed write or flush; later appends fail too
}

// newDecisionLog appends to f; with fsync set an answer waits for its line to be on disk.
func newDecisionLog(f *os.File, fsync bool) *decisionLog {
	l := &decisionLog{f: f, fsync: fsync, sync: f.Sync}
	l.flushed = sync.NewCond(&l.mu)
	return l
}

// append writes the decision's line and, with fsync, returns once it is on
// disk.
func (l *decisionLog) append(envelope []byte, v engine.Verdict) error {
	line, err := json.Marshal(struct {
		Event    string          `json:"event"`
		Verdict  engine.Verdict  `json:"verdict"`
		Envelope json.RawMessage `json:"envelope"`
	}{"decision", v, envelope})
	if err != nil {
		return fmt.Errorf("encode decision line: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	if _, err := l.f.Write(append(line, '\n')); err != nil {
		l.err = fmt.Errorf("append decision log: %w", err)
		return l.err
	}
	l.written++
	if !l.fsync {
		return nil
	}
	mine := l.written
	for l.durable < mine && l.err == nil {
		if l.flushing {
			l.flushed.Wait()
			continue
		}
		l.flush()
	}
	if l.durable >= mine {
		return nil // on disk, even if a later flush failed
	}
	return l.err
}

// flush syncs the file outside the lock; l.mu is held on entry and exit.
func (l *decisionLog) flush() {
	l.flushing = true
	upto := l.written
	l.mu.Unlock()
	err := l.sync()
	l.mu.Lock()
	l.flushing = false
	if err != nil {
		l.err = fmt.Errorf("flush decision log: %w", err)
	} else {
		l.durable = upto
	}
	l.flushed.Broadcast()
}
