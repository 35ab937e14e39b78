// Package holds is the hold store and the hold resolution service of svc.
//
// Store persists holds in SQLite (its own holds and holds_migrations tables
// in the one svc database) and implements engine.Holds: state is derived
// from the stored status and an injected now, so a pending or approved hold
// whose expires_ts has passed reads as expired before any sweep has recorded
// it. Every transition is a single compare-and-set UPDATE.
//
// Service implements engine.Resolver. A resolution is checked in this order,
// the first failing check answering:
//
//  1. 404 not_found: the hold id is unknown.
//  2. 400 invalid_request: decision is not approve or reject, reason too long.
//  3. who asks: 500 resolver_tokens_unavailable when SVC_RESOLVER_TOKENS
//     cannot be read or parsed (never a fallback to asserted principals);
//     403 principal_not_verified when verification is required and the
//     credential maps to no principal; 400 field "principal" when
//     verification is off and no valid principal is asserted.
//  4. 409 not_resolvable: the hold is not pending (expired included) or its
//     rule is terminal. No principal could change that, so the caller learns
//     the fact about the hold rather than a misleading "not you".
//  5. 403 actor_is_approver (four eyes, absolute), then 403
//     principal_type_not_allowed (SVC_RESOLUTION_POLICY, configurable).
//  6. The store's compare-and-set, made in the audit commit of the
//     resolution's line (Journal.Commit), so the hold is resolved together
//     with its line or not at all; a lost race answers 409 with the
//     winner's status.
//  7. If the audit line cannot be written the resolution is not applied and
//     the answer is 500 audit_unavailable (fail closed).
//
// Vet runs checks 1 and 3 to 5 and stops there, resolving nothing: the
// web app (package inbox) asks it whether the signed-in person may decide
// a hold, to say why not in place of the buttons, and then resolves
// through Resolve like the API.
//
// Identity comes before state because it is a property of the caller and
// the deployment, not of the hold: an unverifiable caller gets the same 403
// and remedy for every hold.
package holds
