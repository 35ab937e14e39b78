package engine_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/opa"
	"github.com/svc-dev/svc/ledger"
	"github.com/svc-dev/svc/rego"
)

// gatedEvaluator evaluates with a real evaluator once released, and reports
// each evaluation it is asked for: it holds a decision in flight at a
// chosen moment, which a real opa cannot be made to do on demand.
type gatedEvaluator struct {
	engine.Evaluator
	entered chan struct{}
	release chan struct{}
}

func (g *gatedEvaluator) Evaluate(ctx context.Context, input json.RawMessage) (engine.Verdict, error) {
	g.entered <- struct{}{}
	<-g.release
	return g.Evaluator.Evaluate(ctx, input)
}

// TestFreezeWaitsForDecisionsInFlight: a freeze change waits for the
// decision being evaluated, which is answered and on record under the old
// state before the change; a decision arriving meanwhile waits for the
// change and is decided frozen.
func TestFreezeWaitsForDecisionsInFlight(t *testing.T) {
	ctx := context.Background()
	pack, cleanup, err := rego.Materialize()
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, cleanup()) })
	gate := &gatedEvaluator{Evaluator: opa.NewEvalEvaluator(realOPA(t), pack, 10*time.Second),
		entered: make(chan struct{}, 2), release: make(chan struct{})}
	p := newPipelineWith(t, gate, nil)
	store, err := ledger.NewFreeze(ctx, p.db)
	require.NoError(t, err)
	kill, err := engine.NewKillSwitch(ctx, p.engine, store, false)
	require.NoError(t, err)

	first := make(chan engine.Decision, 1)
	go func() { first <- p.decide(t, "s-1", "update", 1) }()
	<-gate.entered // the first decision is being evaluated, unfrozen

	frozen := make(chan error, 1)
	go func() {
		_, err := kill.Set(ctx, true, "incident", "test")
		frozen <- err
	}()
	select {
	case err := <-frozen:
		t.Fatalf("the freeze returned (%v) while a decision made unfrozen was in flight", err)
	case <-time.After(300 * time.Millisecond):
	}
	second := make(chan engine.Decision, 1)
	go func() { second <- p.decide(t, "s-2", "update", 1) }()

	close(gate.release)
	assert.Equal(t, engine.Allow, (<-first).Decision, "decided under the old state")
	require.NoError(t, <-frozen)
	d := <-second
	assert.Equal(t, engine.Deny, d.Decision, "decided after the change")
	assert.Equal(t, "svc.policy/frozen", d.Rule)

	rows, err := p.audit.Records(ctx, "")
	require.NoError(t, err)
	var order []string
	for _, r := range rows {
		var rec struct {
			Verdict string `json:"verdict"`
		}
		require.NoError(t, json.Unmarshal(r.Body, &rec))
		switch r.Kind {
		case "freeze":
			order = append(order, "freeze")
		case engine.EventDecision:
			order = append(order, rec.Verdict)
		}
	}
	assert.Equal(t, []string{"allow", "freeze", "deny"}, order, "the allow is on record before the freeze")
}

// slowEvaluator takes delay before each real evaluation and reports that it
// started one.
type slowEvaluator struct {
	engine.Evaluator
	delay   time.Duration
	entered chan struct{}
}

func (s *slowEvaluator) Evaluate(ctx context.Context, input json.RawMessage) (engine.Verdict, error) {
	s.entered <- struct{}{}
	time.Sleep(s.delay)
	return s.Evaluator.Evaluate(ctx, input)
}

// TestFreezeDoesNotWaitForASessionsQueue: a freeze change waits for the
// decision being made, not for the decisions of the same session queued
// behind it (a runaway agent flooding one session is when one freezes).
func TestFreezeDoesNotWaitForASessionsQueue(t *testing.T) {
	ctx := context.Background()
	pack, cleanup, err := rego.Materialize()
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, cleanup()) })
	const delay, queued = time.Second, 5 // the queue behind: 4 s
	slow := &slowEvaluator{Evaluator: opa.NewEvalEvaluator(realOPA(t), pack, 10*time.Second),
		delay: delay, entered: make(chan struct{}, queued)}
	p := newPipelineWith(t, slow, nil)
	store, err := ledger.NewFreeze(ctx, p.db)
	require.NoError(t, err)
	kill, err := engine.NewKillSwitch(ctx, p.engine, store, false)
	require.NoError(t, err)

	done := make(chan engine.Decision, queued)
	for range queued {
		go func() { done <- p.decide(t, "flood", "update", 1) }()
	}
	<-slow.entered // one is being evaluated; the others wait for the session
	start := time.Now()
	_, err = kill.Set(ctx, true, "runaway agent", "test")
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 2*delay, "waited for the session's queue, not only the decision being made")
	for range queued {
		<-done
	}
}
