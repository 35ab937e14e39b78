package opa

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/svc-dev/svc/engine"
)

// opaBatchModule is the Rego module a supervised server loads beside the
// policy pack: it decides every input of input.inputs independently (each
// evaluation sees only its own input, exactly as a single query would) and
// returns the verdicts by position. An input whose decision is undefined
// has no entry. It lives in its own package so a policy pack cannot collide
// with it by accident.
//
// The bundled pack checks its data (budget limits, sensitive-action tables)
// for every decision unless the server was given those checks precomputed
// (precomputed.go); they depend on data alone, yet OPA would run them
// anew for each input of the batch. So the module evaluates the pack's
// data_valid once for the batch and, when it is true, adds data_checked:
// true to each input, which spares each decision its own check
// (rego/policy/policy.rego). A pack without data_valid, or with invalid
// data, gets each input as sent, and checks (or not) for itself.
const opaBatchModule = `package svc_internal.batch

decisions := {i: d |
	checked := data_checked
	some i, x in input.inputs
	d := data.svc.policy.decision with input as object.union(x, checked)
}

data_checked := {"data_checked": true} if {
	data.svc.policy.data_valid == true
} else := {}
`

// opaBatchPath is opaBatchModule's decisions as a path of OPA's REST data API.
const opaBatchPath = "/v1/data/svc_internal/batch/decisions"

// opaBatchMax bounds how many decisions one batch query carries.
const opaBatchMax = 32

// batchResult is the verdict of one input of a batch, or why it has none.
type batchResult struct {
	verdict engine.Verdict
	err     error
}

// batchSender evaluates inputs and returns one result per input, in order.
type batchSender func(ctx context.Context, inputs []json.RawMessage) []batchResult

// batcher groups the evaluations that arrive while the policy server is busy
// into batch queries, so that the cost of one HTTP exchange is shared by a
// batch rather than paid by every decision. At most slots queries are in
// flight (one per OPA core is enough to keep the server busy). A caller
// that finds a slot free sends its input at once, alone, so an idle engine
// adds no wait; callers that arrive while every slot is taken queue, and
// when a query returns, its slot passes to the oldest queued caller, which
// sends its own input with the rest of the queue (up to max inputs) as the
// next batch.
//
// Every call gets its verdict within timeout of its arrival, or by its
// context's deadline when that is sooner (the decision's own, of which its
// wait for its session may have used part), time in the queue included, or
// fails: a queued caller whose time is up leaves the queue, and one in a
// batch leaves its result behind. A batch query is bounded by the latest
// deadline of its callers, so that a leader with little time left does not
// cut short the others; it is sent on the leader's goroutine when the
// leader's deadline is that latest one (always when it is alone, so an idle
// engine adds no goroutine), else on a goroutine of its own that holds the
// slot until the query returns, while the leader waits for its result like
// the others. Under load the lead passes to the oldest queued call, whose
// deadline is the earliest, so batches mostly take the goroutine: one per
// batch in flight, at most one per slot. A caller that leaves
// with the lead hands it on, so no slot is lost. Cancellation of a caller's
// context is not consulted: a caller that left on it would strand the batch
// it leads.
type batcher struct {
	send    batchSender
	slots   int
	max     int
	timeout time.Duration

	mu      sync.Mutex
	queue   []*batchCall
	running int // slots taken
}

// batchCall is one caller's input, waiting for its result or its turn to
// lead a batch.
type batchCall struct {
	input    json.RawMessage
	deadline time.Time
	done     chan batchSignal // buffered; receives one signal: lead, or the result
}

type batchSignal struct {
	lead   bool
	result batchResult
}

func newBatcher(send batchSender, slots, max int, timeout time.Duration) *batcher {
	return &batcher{send: send, slots: slots, max: max, timeout: timeout}
}

// Evaluate decides input, alone or in a batch with concurrent callers,
// within the batcher's timeout, or by ctx's deadline when that is sooner.
func (b *batcher) Evaluate(ctx context.Context, input json.RawMessage) (engine.Verdict, error) {
	deadline := time.Now().Add(b.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c := &batchCall{input: input, deadline: deadline, done: make(chan batchSignal, 1)}
	b.mu.Lock()
	if b.running < b.slots {
		b.running++
		b.mu.Unlock()
		if r, ok := b.lead(ctx, c); ok {
			return r.verdict, r.err
		}
	} else {
		b.queue = append(b.queue, c)
		b.mu.Unlock()
	}
	return b.await(ctx, c)
}

// await waits for c's result until c's deadline, leading a batch when it is
// handed the lead.
func (b *batcher) await(ctx context.Context, c *batchCall) (engine.Verdict, error) {
	timer := time.NewTimer(time.Until(c.deadline))
	defer timer.Stop()
	for {
		select {
		case s := <-c.done:
			if !s.lead {
				return s.result.verdict, s.result.err
			}
			if r, ok := b.lead(ctx, c); ok {
				return r.verdict, r.err
			}
		case <-timer.C:
			return b.leave(c)
		}
	}
}

// leave ends a call whose time is up: out of the queue if it is still
// there; else with the result that has just come in, or without the one of
// the batch in flight, whether it rides in it or leads it from a goroutine
// (the result is dropped into the call's buffer), or by handing on the lead
// it was just given.
func (b *batcher) leave(c *batchCall) (engine.Verdict, error) {
	b.mu.Lock()
	if i := slices.Index(b.queue, c); i >= 0 {
		b.queue = slices.Delete(b.queue, i, i+1)
		b.mu.Unlock()
		return engine.Verdict{}, b.timedOut()
	}
	b.mu.Unlock()
	// Out of the queue, the call was either given the lead (signalled under
	// the lock that took it out) or taken into a batch.
	select {
	case s := <-c.done:
		if !s.lead {
			return s.result.verdict, s.result.err
		}
		b.release()
	default:
	}
	return engine.Verdict{}, b.timedOut()
}

func (b *batcher) timedOut() error {
	return fmt.Errorf("evaluate %s: no verdict by the decision's deadline (at most %s): %w", opaQuery, b.timeout, context.DeadlineExceeded)
}

// lead holds a slot: it sends self's input with the queued ones, bounded
// by the latest deadline among them, answers them, then passes the slot
// on. It returns self's result (ok) when it sent the batch itself; when a
// follower's deadline is later than self's, the batch goes out on a
// goroutine of its own and self's result comes on self.done. A leader whose
// time is already up hands the slot on unused.
func (b *batcher) lead(ctx context.Context, self *batchCall) (batchResult, bool) {
	if !time.Now().Before(self.deadline) {
		b.release()
		return batchResult{err: b.timedOut()}, true
	}
	b.mu.Lock()
	n := min(len(b.queue), b.max-1)
	batch := append([]*batchCall{self}, b.queue[:n]...)
	b.queue = slices.Delete(b.queue, 0, n)
	b.mu.Unlock()
	deadline := self.deadline
	for _, c := range batch[1:] {
		if c.deadline.After(deadline) {
			deadline = c.deadline
		}
	}
	if deadline.Equal(self.deadline) {
		return b.answer(ctx, batch, deadline, 1)[0], true
	}
	go b.answer(ctx, batch, deadline, 0)
	return batchResult{}, false
}

// answer sends batch, frees the slot, puts the results of batch[from:] on
// their calls' done channels and returns all the results: from is 1 when
// the leader sends the batch itself and takes its result from the return,
// 0 when the batch goes out on a goroutine of its own. The slot is free
// before any call has its result.
func (b *batcher) answer(ctx context.Context, batch []*batchCall, deadline time.Time, from int) []batchResult {
	results := b.sendBatch(ctx, batch, deadline)
	b.release()
	for i := from; i < len(batch); i++ {
		batch[i].done <- batchSignal{result: results[i]}
	}
	return results
}

// sendBatch sends the inputs of batch, bounded by deadline. A panic in the
// sender, or an answer without one result per input (evaluator bugs), fails
// the batch rather than stranding the followers and the slot.
func (b *batcher) sendBatch(ctx context.Context, batch []*batchCall, deadline time.Time) (results []batchResult) {
	defer func() {
		if p := recover(); p != nil {
			results = failAll(len(batch), fmt.Errorf("evaluate %s: panic: %v", opaQuery, p))
		}
	}()
	inputs := make([]json.RawMessage, len(batch))
	for i, c := range batch {
		inputs[i] = c.input
	}
	sctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	results = b.send(sctx, inputs)
	if len(results) != len(batch) {
		return failAll(len(batch), fmt.Errorf("evaluate %s: %d results for %d inputs", opaQuery, len(results), len(batch)))
	}
	return results
}

// release passes the caller's slot to the oldest queued call, or frees it.
func (b *batcher) release() {
	b.mu.Lock()
	if len(b.queue) > 0 {
		next := b.queue[0]
		b.queue = slices.Delete(b.queue, 0, 1)
		next.done <- batchSignal{lead: true}
	} else {
		b.running--
	}
	b.mu.Unlock()
}

// failAll is the result of a batch that could not be evaluated at all.
func failAll(n int, err error) []batchResult {
	results := make([]batchResult, n)
	for i := range results {
		results[i].err = err
	}
	return results
}
