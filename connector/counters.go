package connector

import "sync/atomic"

// Counters are the connector's counters of gateway spec §2.4, shown in
// health (with the connector token) and in /metrics.
type Counters struct {
	ResponsesSeen    atomic.Int64 // gateway answers governed (post-call requests and batch requests)
	ToolCallsDecided atomic.Int64 // tool calls given an outcome
	Allowed          atomic.Int64 // tool calls whose outcome is allow (what enforce would do, in observe mode)
	Blocked          atomic.Int64 // tool calls refused, whatever the cause
	PreCallRequests  atomic.Int64 // pre-call guardrail requests (they carry no chosen call)
	UnmappedTenant   atomic.Int64 // requests from callers the tenancy map binds to no org
	InternalErrors   atomic.Int64 // faults answered fail closed (engine away, ledger, panics)
	Unauthorised     atomic.Int64 // requests without the connector token
	InvalidRequests  atomic.Int64 // request bodies the connector could not read
}

// CounterNames lists the counters in the order Snapshot reports them.
var CounterNames = []string{"responses_seen", "tool_calls_decided", "allowed", "blocked", "pre_call_requests",
	"unmapped_tenant", "internal_errors", "unauthorised", "invalid_requests"}

// Snapshot reads every counter.
func (c *Counters) Snapshot() map[string]int64 {
	return map[string]int64{
		"responses_seen": c.ResponsesSeen.Load(), "tool_calls_decided": c.ToolCallsDecided.Load(),
		"allowed": c.Allowed.Load(), "blocked": c.Blocked.Load(), "pre_call_requests": c.PreCallRequests.Load(),
		"unmapped_tenant": c.UnmappedTenant.Load(), "internal_errors": c.InternalErrors.Load(),
		"unauthorised": c.Unauthorised.Load(), "invalid_requests": c.InvalidRequests.Load(),
	}
}

func (c *Counters) add(v *atomic.Int64, n int64) { v.Add(n) }

// count counts one tool call's outcome.
func (c *Counters) count(o Outcome) {
	c.ToolCallsDecided.Add(1)
	if o.Outcome == OutcomeAllow {
		c.Allowed.Add(1)
	} else {
		c.Blocked.Add(1)
	}
}
