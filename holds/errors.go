package holds

import (
	"fmt"

	"github.com/svc-dev/svc/engine"
)

// Sentinel errors of the hold routes. Every error this package returns for
// them is an *engine.Error of the same code and name carrying its own
// fields, so errors.Is(err, ErrNotResolvable) matches any of them.
var (
	ErrNotFound          = &engine.Error{Code: engine.ENOTFOUND, Name: "not_found"}
	ErrNotResolvable     = &engine.Error{Code: engine.ECONFLICT, Name: "not_resolvable"}
	ErrNotRedeemable     = &engine.Error{Code: engine.ECONFLICT, Name: "not_redeemable"}
	ErrExists            = &engine.Error{Code: engine.ECONFLICT, Name: "hold_exists"}
	ErrNotVerified       = &engine.Error{Code: engine.EFORBIDDEN, Name: "principal_not_verified"}
	ErrActorIsApprover   = &engine.Error{Code: engine.EFORBIDDEN, Name: "actor_is_approver"}
	ErrTypeNotAllowed    = &engine.Error{Code: engine.EFORBIDDEN, Name: "principal_type_not_allowed"}
	ErrTokensUnavailable = &engine.Error{Code: engine.EINTERNAL, Name: "resolver_tokens_unavailable"}
	ErrAuditUnavailable  = engine.ErrAuditUnavailable
)

// Why values of a principal_not_verified remedy (spec §7).
const (
	whyNotConfigured = "verification_not_configured"
	whyUnbound       = "unbound_credential"
)

// RemedyDocs is the documentation pointer of a principal_not_verified remedy.
const RemedyDocs = "docs/holds.md#verified-approvers"

// remedy tells an approver that cannot be verified what to do about it.
type remedy struct {
	Principal *string  `json:"principal"`
	Why       string   `json:"why"`
	Actions   []string `json:"actions"`
	Docs      string   `json:"docs"`
}

func derive(sentinel *engine.Error, msg string, fields map[string]any) *engine.Error {
	return &engine.Error{Code: sentinel.Code, Name: sentinel.Name, Message: msg, Fields: fields}
}

func notFound(id string) *engine.Error {
	return derive(ErrNotFound, "hold not found", map[string]any{"hold_id": id})
}

func notResolvable(id, status, reason string) *engine.Error {
	return derive(ErrNotResolvable, reason,
		map[string]any{"hold_id": id, "status": status, "reason": reason})
}

func notRedeemable(id, status string) *engine.Error {
	return derive(ErrNotRedeemable, "hold is "+status+", not approved and unexpired",
		map[string]any{"hold_id": id, "status": status})
}

func notVerified(id, why string, asserted *engine.Principal) *engine.Error {
	reason := "approver verification is required but SVC_RESOLVER_TOKENS binds no credential to a principal"
	actions := []string{
		`set SVC_RESOLVER_TOKENS to a JSON object {"<token>": {"type": "human", "id": "<id>"}}, inline or as a file path`,
		"resolve with Authorization: Bearer <a token listed in SVC_RESOLVER_TOKENS>",
		"or set SVC_REQUIRE_VERIFIED_APPROVER=false to accept an asserted principal, recorded as decided_by_verified: false",
	}
	if why == whyUnbound {
		reason = "the presented credential is not bound to a principal in SVC_RESOLVER_TOKENS"
		actions = []string{
			"resolve with Authorization: Bearer <a token listed in SVC_RESOLVER_TOKENS>",
			"ask the operator to bind your token to your principal in SVC_RESOLVER_TOKENS",
		}
	}
	var who *string
	if asserted != nil {
		s := asserted.String()
		who = &s
	}
	return derive(ErrNotVerified, reason, map[string]any{
		"reason": reason, "hold_id": id,
		"remedy": remedy{Principal: who, Why: why, Actions: actions, Docs: RemedyDocs},
	})
}

func actorIsApprover(id string, p engine.Principal) *engine.Error {
	reason := "the requesting agent and the principal it acts for cannot resolve its hold"
	return derive(ErrActorIsApprover, reason,
		map[string]any{"reason": reason, "hold_id": id, "principal": p.String()})
}

func typeNotAllowed(id, rule string, p engine.Principal, allowed []string) *engine.Error {
	reason := fmt.Sprintf("principal type %s may not resolve holds of rule %s", p.Type, rule)
	return derive(ErrTypeNotAllowed, reason, map[string]any{
		"reason": reason, "hold_id": id, "principal": p.String(), "rule": rule, "allowed": allowed,
	})
}

func tokensUnavailable(err error) *engine.Error {
	// The detail (a path, an offset) goes to the message for the log, not
	// to the response body.
	return derive(ErrTokensUnavailable, "resolver tokens cannot be read, resolution refused: "+err.Error(),
		map[string]any{"reason": "SVC_RESOLVER_TOKENS cannot be read or parsed; resolution is refused until the operator fixes it"})
}
