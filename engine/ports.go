package engine

import (
	"context"
	"encoding/json"
	"time"

	"github.com/svc-dev/svc/engine/envelope"
)

// Evaluator evaluates the policy input document (see docs/policy.md) and
// returns the verdict of data.svc.policy.decision. Any failure is an error;
// the engine turns every error into deny.
type Evaluator interface {
	Evaluate(ctx context.Context, input json.RawMessage) (Verdict, error)
}

// Totals are a session's cumulative charges over the rolling window.
type Totals struct {
	Deletes       int64 `json:"deletes"`
	ExternalSends int64 `json:"external_sends"`
	Objects       int64 `json:"objects"`
}

// Usage is what a budget subject (a session, an agent, a principal) has
// spent over the rolling window: its counted totals and, per ISO 4217
// currency, the money it moved in units of 1/10 000 (Money.Units).
type Usage struct {
	Totals
	Money Amounts `json:"money"`
}

// Amounts are sums of money per ISO 4217 currency, in units of 1/10 000.
type Amounts map[string]int64

// MarshalJSON writes no amounts as {}, never null: the policy reads the
// member as an object.
func (a Amounts) MarshalJSON() ([]byte, error) {
	if a == nil {
		return []byte("{}"), nil
	}
	return json.Marshal(map[string]int64(a))
}

// Scope names whose spending a budget counts.
type Scope string

// The budget scopes: every charge is counted against its session, its
// agent and, when it acts for one, its principal (agent.on_behalf_of).
const (
	ScopeSession   Scope = "session"
	ScopeAgent     Scope = "agent"
	ScopePrincipal Scope = "principal"
)

// Charge is what one allowed action adds to the totals of its session, its
// agent and its principal (none when PrincipalID is ""). Amount is in units
// of 1/10 000 of Currency; 0 (and Currency "") when the action moves no
// money.
type Charge struct {
	SessionID   string
	AgentID     string
	PrincipalID string
	DecisionID  string
	At          time.Time
	Totals
	Currency string
	Amount   int64
}

// Budgets reads the ledger of cumulative charges. Charges are written with
// the decision's audit records (Journal.Commit); the engine serialises the
// decisions of one session, one agent and one principal from Usage to that
// commit, so an implementation needs no locking of its own.
type Budgets interface {
	// Usage sums the charges of the subject id of scope made at or after
	// since.
	Usage(ctx context.Context, scope Scope, id string, since time.Time) (Usage, error)
}

// Recorder appends one audit record. It returns only after the record is
// stored (JSONL line written, mirror row committed, both flushed to disk
// unless SVC_DURABILITY=os); an error means the record may be missing, and
// the engine then answers deny.
type Recorder interface {
	Record(ctx context.Context, kind string, record any) error
}

// AuditRecord is one record of the audit log: its kind and its body.
type AuditRecord struct {
	Kind string
	Body any
}

// Journal is the Recorder of the decide path: it commits everything one
// decision writes as one durable step, so a decision costs one commit and
// nothing it wrote exists without its record.
type Journal interface {
	Recorder
	// Commit records the entry's records in order and, in the same
	// transaction, stores its charge and makes its hold write (creates,
	// consumes or resolves its hold); it returns only once all are stored,
	// and an error means nothing of it was stored. An entry carries one
	// hold write at most. A consumption of a hold that is no longer
	// approved and unexpired, or a resolution of one that is no longer
	// pending and unexpired, fails with ErrConflict.
	Commit(ctx context.Context, e Entry) error
	// RecordDegraded records, best effort, the record of a decision whose
	// Commit failed (its fail-closed deny): to each sink of the audit log
	// on its own (the JSONL file; the SQLite mirror), so that it reaches
	// whichever still works. It succeeds if either stored it, stores no
	// charge or hold, and returns by ctx's deadline or soon after.
	RecordDegraded(ctx context.Context, kind string, record any) error
}

// Entry is what one decision, or one resolution of a hold, puts on record.
// At most one of Create, Consume and Resolve is set.
type Entry struct {
	Records []AuditRecord
	Charge  *Charge         // the charge of an allow; nil when none
	Create  *Hold           // the hold a require_approval raises; nil when none
	Consume *Consumption    // the approved hold a re-submission redeems; nil when none
	Resolve *HoldResolution // the pending hold an approver resolves; nil when none
}

// HoldResolution approves or rejects a pending hold: a compare-and-set from
// pending and unexpired (at At) to Status, decided by By at At.
type HoldResolution struct {
	HoldID   string
	Status   string    // HoldApproved or HoldRejected
	By       Principal // who decided
	Verified bool      // By came from a resolver credential, not the request body
	Reason   string    // the approver's free text; "" when none
	At       time.Time // decision time; the hold must be unexpired then
}

// Consumption redeems an approved hold: a compare-and-set from approved and
// unexpired (at At) to consumed by the decision DecisionID.
type Consumption struct {
	HoldID     string
	DecisionID string
	At         time.Time
}

// Publisher hands an event to the export queues. It never blocks and never
// fails the caller: delivery problems are the exporter's to count.
type Publisher interface {
	Publish(ev Event)
}

// Event is one exported event: its type (decision, lifecycle, kill_switch,
// hold.created, hold.resolved, hold.expired, freeze.flipped) and its body.
type Event struct {
	Type string
	Body any
}

// Hold statuses (spec §3).
const (
	HoldPending  = "pending"
	HoldApproved = "approved"
	HoldRejected = "rejected"
	HoldExpired  = "expired"
	HoldConsumed = "consumed"
)

// Principal is an identity that can resolve holds, written <type>:<id>.
type Principal struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// String renders the principal as <type>:<id>.
func (p Principal) String() string { return p.Type + ":" + p.ID }

// Hold is a pending approval created by a require_approval decision.
type Hold struct {
	ID           string             `json:"id"`
	Status       string             `json:"status"`
	Rule         string             `json:"rule"`
	Reason       string             `json:"reason"`
	Envelope     *envelope.Envelope `json:"envelope"`
	EnvelopeHash string             `json:"envelope_hash"`
	ParamsHash   string             `json:"params_hash"`
	// Gate is the gate of the portal credential that raised the hold, ""
	// for SVC_AUTH_TOKEN or none; nil for a hold raised before svc recorded
	// gates, which is not bound to one.
	Gate              *string    `json:"gate"`
	CreatedTS         time.Time  `json:"created_ts"`
	ExpiresTS         time.Time  `json:"expires_ts"`
	DecidedBy         *Principal `json:"decided_by"`
	DecidedTS         *time.Time `json:"decided_ts"`
	DecidedByVerified *bool      `json:"decided_by_verified"`
	ResolutionReason  string     `json:"resolution_reason"`
	ConsumedTS        *time.Time `json:"consumed_ts"`
	DecisionID        string     `json:"decision_id"`
	ConsumedBy        string     `json:"consumed_by_decision_id,omitempty"`
	// Approvers is, when it differs from the default, the principal types
	// SVC_RESOLUTION_POLICY lets approve the hold's rule, sorted and
	// joined: part of the binding of a hold being raised (HoldBinding), not
	// stored.
	Approvers string `json:"-"`
}

// HoldQuery selects a page of holds. Status "all" or "" means no filter,
// "settled" every hold no longer pending. Holds come oldest first, or
// newest first with Newest.
type HoldQuery struct {
	Status string
	Limit  int
	Cursor string
	Newest bool
	Now    time.Time
}

// HoldPage is one page of a hold listing.
type HoldPage struct {
	Items      []Hold  `json:"items"`
	Count      int     `json:"count"`
	NextCursor *string `json:"next_cursor"`
}

// Holds reads the durable hold store; the decision path writes holds
// through Journal.Commit. Get and ListJSON report a pending or approved hold
// whose expiry has passed as expired. Reusable returns the hold a
// require_approval of binding (HoldBinding) reuses: one that is pending,
// or approved and not consumed, and unexpired at now (an approved one
// first, then the newest); ErrNotFound when there is none.
//
// A Journal that creates a hold (Entry.Create) while such a hold exists
// refuses it with an error matching ErrIdenticalHold, in the transaction
// that would have created it: of concurrent identical require_approval
// decisions one creates the hold and the others reuse it.
type Holds interface {
	Get(ctx context.Context, id string, now time.Time) (Hold, error)
	// ListJSON returns one page of a listing as the JSON of a HoldPage,
	// bounded in bytes as well as in holds: it is encoded one hold at a
	// time, never holding the page's holds decoded.
	ListJSON(ctx context.Context, q HoldQuery) ([]byte, error)
	Reusable(ctx context.Context, binding string, now time.Time) (Hold, error)
}

// ResolveRequest is a request to approve or reject a hold, as received on
// POST /v1/holds/{id}/resolve.
type ResolveRequest struct {
	HoldID     string
	Credential string     // bearer token presented, "" if none
	Decision   string     // approve or reject
	Reason     string     // optional free text
	Asserted   *Principal // body principal, honoured only when verification is off
	Now        time.Time
}

// Resolver decides who may resolve a hold and applies the resolution:
// credential → principal, verification, resolution policy, four eyes, state
// transition. Errors are *Error values with codes the HTTP layer maps.
type Resolver interface {
	Resolve(ctx context.Context, r ResolveRequest) (Hold, error)
	// Identify returns the principal a resolver credential stands for; such
	// tokens are accepted as bearer credentials on the hold and freeze
	// routes. ok is false for an unknown token; err is set when the token
	// set cannot be read (nobody is authenticated then).
	Identify(token string) (p Principal, ok bool, err error)
}

// MarshalJSON renders the hold with every timestamp in FormatTime form.
func (h Hold) MarshalJSON() ([]byte, error) {
	type plain Hold
	opt := func(t *time.Time) *string {
		if t == nil {
			return nil
		}
		s := FormatTime(*t)
		return &s
	}
	return json.Marshal(struct {
		plain
		CreatedTS  string  `json:"created_ts"`
		ExpiresTS  string  `json:"expires_ts"`
		DecidedTS  *string `json:"decided_ts"`
		ConsumedTS *string `json:"consumed_ts"`
	}{plain(h), FormatTime(h.CreatedTS), FormatTime(h.ExpiresTS), opt(h.DecidedTS), opt(h.ConsumedTS)})
}
