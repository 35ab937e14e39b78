// Package opa holds the engine's Evaluators backed by the opa binary: eval
// mode (an `opa eval` per decision, started ahead), a supervised `opa run
// --server` on a private unix socket (batched queries, restarts, a pack's
// data-only values computed once), and an OPA server svc does not manage
// (REST). Each reads OPA's answer into an engine.Verdict and turns every
// fault (a missing binary, a timeout, a malformed or undefined decision)
// into an error, which the engine answers with deny.
package opa
