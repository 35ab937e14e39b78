package opa

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/envelope"
)

// opaQuery is the one query svc asks of a policy pack.
const opaQuery = "data.svc.policy.decision"

const (
	// opaMaxOutput bounds what an opa run may print: a verdict is a few
	// hundred bytes, and a runaway child must not grow memory without bound.
	opaMaxOutput = 1 << 20
	// opaMaxSnippet bounds the opa output quoted in an error.
	opaMaxSnippet = 512
	// opaWaitDelay bounds how long a finished or killed opa may keep its
	// output pipes open (through a child it left behind) before they are
	// closed under it.
	opaWaitDelay = 500 * time.Millisecond
)

// EvalEvaluator is the engine.Evaluator that runs `opa eval` once per decision on
// the policy pack in a directory. Each run is bounded by a timeout and runs
// in its own process group, which is killed whole on timeout or cancel.
// With spares (WithSpares), processes are started ahead of the decisions
// that take them; each still reads the pack when it gets its input.
type EvalEvaluator struct {
	bin       string
	policyDir string
	timeout   time.Duration
	env       []string   // opa's environment
	spares    *sparePool // nil: each decision starts its own process
}

var _ engine.Evaluator = (*EvalEvaluator)(nil)

// MaxEvalSpares bounds WithSpares: each spare is an idle opa process.
const MaxEvalSpares = 16

// NewEvalEvaluator returns an evaluator running the opa binary bin (a path,
// or a name looked up on PATH) on the policy and data files in policyDir,
// each run bounded by timeout. A non-positive timeout fails every run. opa
// runs in svc's environment as it is now, with GOGC=opaGCPercent added when
// it sets none (WithEnviron replaces it).
func NewEvalEvaluator(bin, policyDir string, timeout time.Duration) *EvalEvaluator {
	return &EvalEvaluator{bin: bin, policyDir: policyDir, timeout: timeout, env: opaEnv(os.Environ())}
}

// WithSpares keeps n (at most MaxEvalSpares) `opa eval` processes started
// and waiting for a decision's input, so that a decision does not wait for
// opa's start; 0 keeps none. The pool fills after the first decision (the
// start-up check's) and after each decision that takes a spare. Close kills
// the spares.
func (e *EvalEvaluator) WithSpares(n int) *EvalEvaluator {
	n = min(max(n, 0), MaxEvalSpares)
	if n > 0 {
		e.spares = &sparePool{size: n, start: e.startEval}
	}
	return e
}

// WithEnviron runs opa with exactly env (a bare `opa eval`, as a user runs
// it, for a baseline) instead of svc's environment with GOGC=opaGCPercent
// added when it sets none. Call it before the first decision.
func (e *EvalEvaluator) WithEnviron(env []string) *EvalEvaluator {
	e.env = env
	return e
}

// Close kills the spare processes; decisions after it start their own.
func (e *EvalEvaluator) Close() error {
	if e.spares != nil {
		e.spares.close()
	}
	return nil
}

// Evaluate runs data.svc.policy.decision on input. It returns a nil error
// only with a valid verdict; every fault of the run or of its output is an
// error, which the engine turns into deny.
func (e *EvalEvaluator) Evaluate(ctx context.Context, input json.RawMessage) (engine.Verdict, error) {
	out, err := e.eval(ctx, input)
	if err != nil {
		return engine.Verdict{}, fmt.Errorf("evaluate %s: %w", opaQuery, err)
	}
	v, err := parseOPAVerdict(out)
	if err != nil {
		return engine.Verdict{}, fmt.Errorf("evaluate %s: %w", opaQuery, err)
	}
	return v, nil
}

// eval hands input to a spare, or to a process started now, and returns
// what it printed.
func (e *EvalEvaluator) eval(ctx context.Context, input []byte) ([]byte, error) {
	var p *opaProc
	if e.spares != nil {
		p = e.spares.take()
		e.spares.refill()
	}
	if p == nil {
		var err error
		if p, err = e.startEval(); err != nil {
			return nil, err
		}
	}
	return p.finish(ctx, input, e.timeout)
}

// startEval starts `opa eval` of the decision query, reading its input from
// standard input.
func (e *EvalEvaluator) startEval() (*opaProc, error) {
	return startOPA(e.bin, e.env, "eval", "--format", "json", "--stdin-input",
		"--strict-builtin-errors", "--data", e.policyDir, opaQuery)
}

// Check is the start-up probe: the binary runs, and the policy compiles and
// yields a valid verdict for a small sample input.
func (e *EvalEvaluator) Check(ctx context.Context) error {
	if _, err := e.run(ctx, nil, "version"); err != nil {
		return fmt.Errorf("opa binary %q not runnable: %w", e.bin, err)
	}
	input, err := json.Marshal(probeInput())
	if err != nil {
		return fmt.Errorf("encode probe input: %w", err)
	}
	if _, err := e.Evaluate(ctx, input); err != nil {
		return fmt.Errorf("policy in %s does not compile or yields no decision: %w", e.policyDir, err)
	}
	return nil
}

// probeInput is an internal read in dev: every sound pack decides it.
func probeInput() engine.PolicyInput {
	return engine.PolicyInput{
		Envelope: &envelope.Envelope{
			Agent:     envelope.Agent{ID: "svc-probe", SessionID: "svc-probe"},
			Action:    envelope.Action{Namespace: "svc", Verb: "read", RawVerb: "read", Ability: "svc/read"},
			Target:    envelope.Target{Kind: "probe", Ref: "probe", Environment: "dev", RawEnvironment: "dev"},
			Magnitude: envelope.Magnitude{Count: 1},
			Axes:      envelope.Axes{Reversibility: "reversible", BlastRadius: "single", Externality: "internal"},
			Mode:      envelope.ModeEnforce,
		},
		ActionWords: []string{"read", "svc"},
		Cumulative:  engine.Cumulative{WindowSeconds: 3600},
	}
}

// run runs the opa binary with args and stdin and returns its stdout.
func (e *EvalEvaluator) run(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	p, err := startOPA(e.bin, e.env, args...)
	if err != nil {
		return nil, err
	}
	return p.finish(ctx, stdin, e.timeout)
}

// killProcessGroup kills opa and every process it started.
func killProcessGroup(pid int) error {
	err := syscall.Kill(-pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

// failureSnippet quotes what a failed opa said: stderr, or stdout where opa
// --format json prints its errors.
func failureSnippet(stderr, stdout *opaOutput) string {
	if s := opaSnippet(stderr.buf.Bytes()); s != "" {
		return s
	}
	if s := opaSnippet(stdout.buf.Bytes()); s != "" {
		return s
	}
	return "no output"
}

// opaSnippet renders b on one line, cut to opaMaxSnippet bytes.
func opaSnippet(b []byte) string {
	s := strings.Join(strings.Fields(strings.ToValidUTF8(string(b), "?")), " ")
	if len(s) <= opaMaxSnippet {
		return s
	}
	cut := opaMaxSnippet
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// opaOutput keeps the first limit bytes written to it and notes whether
// more were written.
type opaOutput struct {
	buf   bytes.Buffer
	limit int
	over  bool
}

// Write implements io.Writer; it never fails, so the child is never blocked
// on a full pipe.
func (o *opaOutput) Write(p []byte) (int, error) {
	n := len(p)
	if room := o.limit - o.buf.Len(); n > room {
		o.over = true
		p = p[:max(room, 0)]
	}
	o.buf.Write(p)
	return n, nil
}

// parseOPAVerdict extracts the one valid verdict from the output of
// `opa eval --format json` (evalValue).
func parseOPAVerdict(out []byte) (engine.Verdict, error) {
	value, defined, err := evalValue(out)
	switch {
	case err != nil:
		return engine.Verdict{}, err
	case !defined:
		return engine.Verdict{}, errPolicyUndefined
	}
	return verdictOf(value)
}

// evalValue extracts the value of the one query expression from the output
// of `opa eval --format json`, {"result": [{"expressions": [{"value": ...}]}]}:
// one result per solution, one value per query expression. An undefined
// query prints {}: no value, defined false. Member names are matched
// exactly (see ExactMembers).
func evalValue(out []byte) (value json.RawMessage, defined bool, err error) {
	result, n, err := onlyElement(out, "result")
	switch {
	case err != nil:
		return nil, false, fmt.Errorf("parse opa output %q: %w", opaSnippet(out), err)
	case n == 0:
		return nil, false, nil
	case n > 1:
		return nil, false, fmt.Errorf("policy returned %d results, want 1", n)
	}
	expression, n, err := onlyElement(result, "expressions")
	switch {
	case err != nil:
		return nil, false, fmt.Errorf("parse opa output %q: %w", opaSnippet(out), err)
	case n != 1:
		return nil, false, fmt.Errorf("policy returned %d expressions, want 1", n)
	}
	var member [1]json.RawMessage
	if err := envelope.ExactMembers(expression, []string{"value"}, member[:]); err != nil {
		return nil, false, fmt.Errorf("parse opa output %q: %w", opaSnippet(out), err)
	}
	return member[0], true, nil
}

// onlyElement reads the member name of the object doc as an array and
// returns its length and, when that is 1, its element. An absent or null
// member is an empty array.
func onlyElement(doc []byte, name string) (json.RawMessage, int, error) {
	var member [1]json.RawMessage
	if err := envelope.ExactMembers(doc, []string{name}, member[:]); err != nil {
		return nil, 0, err
	}
	var elements []json.RawMessage
	if member[0] != nil {
		if err := json.Unmarshal(member[0], &elements); err != nil {
			return nil, 0, fmt.Errorf("member %q: %w", name, err)
		}
	}
	if len(elements) != 1 {
		return nil, len(elements), nil
	}
	return elements[0], 1, nil
}
