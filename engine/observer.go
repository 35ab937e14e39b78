package engine

import "time"

// Observer receives the engine's measurements of its decision path. The
// metrics package implements it; the engine knows nothing of Prometheus.
// Calls are made on the request path, so an implementation must be cheap,
// safe for concurrent use and never block.
type Observer interface {
	// Decided reports one answered decision: its verdict, its rule and the
	// time from the request's arrival until the decision was on record.
	Decided(verdict, rule string, latency time.Duration)
	// Evaluated reports one policy evaluation and how long it took; err is
	// nil only when the evaluator returned a valid verdict.
	Evaluated(latency time.Duration, err error)
}

// NopObserver discards measurements: the observer when none is configured.
type NopObserver struct{}

var _ Observer = NopObserver{}

// Decided implements Observer.
func (NopObserver) Decided(string, string, time.Duration) {}

// Evaluated implements Observer.
func (NopObserver) Evaluated(time.Duration, error) {}
