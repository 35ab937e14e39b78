package engine

import (
	"context"
	"encoding/json"
	"sync"
)

// opaBatchModule is the Rego module a supervised server loads beside the
// policy pack: it decides every input of input.inputs independently (each
// evaluation sees only its own input, exactly as a single query would) and
// returns the verdicts by position. An input whose decision is undefined
// has no entry. It lives in its own package so a policy pack cannot collide
// with it by accident.
const opaBatchModule = `package svc_internal.batch

decisions := {i: d |
	some i, x in input.inputs
	d := data.svc.policy.decision with input as x
}
`

// opaBatchPath is opaBatchModule's decisions as a path of OPA's REST data API.
const opaBatchPath = "/v1/data/svc_internal/batch/decisions"

// opaBatchMax bounds how many decisions one batch query carries.
const opaBatchMax = 32

// batchResult is the verdict of one input of a batch, or why it has none.
type batchResult struct {
	verdict Verdict
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
// next batch. A queued call leaves the queue exactly once, either with its
// result or to lead, so it is signalled once. Callers wait for their
// result without regard to their context: the sender bounds each query by
// its timeout, and a caller that left would strand its batch.
type batcher struct {
	send  batchSender
	slots int
	max   int

	mu      sync.Mutex
	queue   []*batchCall
	running int // slots taken
}

// batchCall is one caller's input, waiting for its result or its turn to
// lead a batch.
type batchCall struct {
	input json.RawMessage
	done  chan batchSignal // buffered; receives one signal: lead, or the result
}

type batchSignal struct {
	lead   bool
	result batchResult
}

func newBatcher(send batchSender, slots, max int) *batcher {
	return &batcher{send: send, slots: slots, max: max}
}

// Evaluate decides input, alone or in a batch with concurrent callers.
func (b *batcher) Evaluate(ctx context.Context, input json.RawMessage) (Verdict, error) {
	c := &batchCall{input: input, done: make(chan batchSignal, 1)}
	b.mu.Lock()
	if b.running < b.slots {
		b.running++
		b.mu.Unlock()
		return b.lead(ctx, c)
	}
	b.queue = append(b.queue, c)
	b.mu.Unlock()
	if s := <-c.done; !s.lead {
		return s.result.verdict, s.result.err
	}
	return b.lead(ctx, c)
}

// lead holds a slot: it sends self's input with the queued ones, answers
// them, then passes the slot to the oldest queued call or frees it, and
// returns self's result.
func (b *batcher) lead(ctx context.Context, self *batchCall) (Verdict, error) {
	b.mu.Lock()
	n := min(len(b.queue), b.max-1)
	batch := append([]*batchCall{self}, b.queue[:n]...)
	b.queue = append(b.queue[:0], b.queue[n:]...)
	b.mu.Unlock()

	inputs := make([]json.RawMessage, len(batch))
	for i, c := range batch {
		inputs[i] = c.input
	}
	results := b.send(context.WithoutCancel(ctx), inputs)
	for i, c := range batch[1:] {
		c.done <- batchSignal{result: results[i+1]}
	}

	b.mu.Lock()
	if len(b.queue) > 0 {
		next := b.queue[0]
		b.queue = append(b.queue[:0], b.queue[1:]...)
		next.done <- batchSignal{lead: true}
	} else {
		b.running--
	}
	b.mu.Unlock()
	return results[0].verdict, results[0].err
}

// failAll is the result of a batch that could not be evaluated at all.
func failAll(n int, err error) []batchResult {
	results := make([]batchResult, n)
	for i := range results {
		results[i].err = err
	}
	return results
}
