// Package engine is the decision core of svc: the Decision, the decide
// pipeline, holds and their queries, the kill switch, and the interfaces of
// the parts it consumes (Evaluator, Budgets, Holds, Recorder, Publisher).
// The Action Envelope, its canonical form and its hash live in package
// envelope, the OPA evaluators in package opa, the HTTP API in package api.
// Everything that can fail in the decision path fails closed: the answer
// is deny, never allow.
package engine
