// Package engine is the decision core of svc: the Action Envelope and its
// canonical form, the envelope hash, the Decision, the decide pipeline, the
// engine's HTTP routes, and the interfaces of the parts it consumes
// (Evaluator, Budgets, Holds, Recorder, Publisher). Everything that can fail
// in the decision path fails closed: the answer is deny, never allow.
package engine
