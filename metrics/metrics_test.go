package metrics_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/svc-dev/svc/metrics"
	"github.com/svc-dev/svc/metrics/metricstest"
)

// scrape fetches the collector's /metrics over loopback.
func scrape(t *testing.T, c *metrics.Collector) map[string]float64 {
	t.Helper()
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	return metricstest.Scrape(t, srv.URL, "")
}

func TestObserverMovesDecisionMetrics(t *testing.T) {
	c := metrics.New(metrics.Sources{})
	before := scrape(t, c)
	assert.NotContains(t, before, `svc_decisions_total{rule="svc.policy/default_allow",verdict="allow"}`)
	assert.Equal(t, 0.0, before["svc_decide_duration_seconds_count"])
	assert.Equal(t, 0.0, before["svc_opa_evaluation_failures_total"])
	assert.Contains(t, before, "process_resident_memory_bytes", "process metrics are exposed")

	c.Decided("allow", "svc.policy/default_allow", 2*time.Millisecond)
	c.Decided("allow", "svc.policy/default_allow", 3*time.Millisecond)
	c.Decided("deny", "svc.core/internal_error", 40*time.Millisecond)
	c.Evaluated(time.Millisecond, nil)
	c.Evaluated(20*time.Millisecond, errors.New("opa timed out"))

	after := scrape(t, c)
	for key, want := range map[string]float64{
		`svc_decisions_total{rule="svc.policy/default_allow",verdict="allow"}`: 2,
		`svc_decisions_total{rule="svc.core/internal_error",verdict="deny"}`:   1,
		"svc_decide_duration_seconds_count":                                    3,
		`svc_decide_duration_seconds_bucket{le="0.0025"}`:                      1,
		`svc_decide_duration_seconds_bucket{le="0.005"}`:                       2,
		`svc_decide_duration_seconds_bucket{le="+Inf"}`:                        3,
		"svc_opa_evaluation_duration_seconds_count":                            2,
		`svc_opa_evaluation_duration_seconds_bucket{le="0.001"}`:               1,
		"svc_opa_evaluation_failures_total":                                    1,
	} {
		assert.Equal(t, want, after[key], key)
	}
	assert.InDelta(t, 0.045, after["svc_decide_duration_seconds_sum"], 1e-9)
}

// holdCounter stands in for the hold store, to inject a query failure.
type holdCounter struct {
	counts map[string]int
	err    error
	now    time.Time // the time the last query was asked about
}

func (h *holdCounter) CountByStatus(_ context.Context, now time.Time) (map[string]int, error) {
	h.now = now
	return h.counts, h.err
}

type queues []metrics.QueueStats

func (q queues) Queues() []metrics.QueueStats { return q }

func TestScrapeTimeSources(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	holds := &holdCounter{counts: map[string]int{"pending": 3, "consumed": 1, "quarantined": 2}}
	c := metrics.New(metrics.Sources{
		Holds: holds,
		Export: queues{
			{Destination: "syslog", Depth: 4, Capacity: 1024, Dropped: 7, Sent: 90, Errors: 2},
			{Destination: "webhook", Capacity: 256, Sent: 5},
		},
		Now: func() time.Time { return now },
	})
	got := scrape(t, c)
	for key, want := range map[string]float64{
		`svc_holds{status="pending"}`:                             3,
		`svc_holds{status="approved"}`:                            0,
		`svc_holds{status="rejected"}`:                            0,
		`svc_holds{status="expired"}`:                             0,
		`svc_holds{status="consumed"}`:                            1,
		`svc_holds{status="quarantined"}`:                         2,
		`svc_export_queue_depth{destination="syslog"}`:            4,
		`svc_export_queue_capacity{destination="syslog"}`:         1024,
		`svc_export_dropped_total{destination="syslog"}`:          7,
		`svc_export_sent_total{destination="syslog"}`:             90,
		`svc_export_errors_total{destination="syslog"}`:           2,
		`svc_export_queue_depth{destination="webhook"}`:           0,
		`svc_export_queue_capacity{destination="webhook"}`:        256,
		`svc_export_dropped_total{destination="webhook"}`:         0,
		`svc_export_sent_total{destination="webhook"}`:            5,
		`promhttp_metric_handler_errors_total{cause="gathering"}`: 0,
	} {
		v, ok := got[key]
		if assert.True(t, ok, "missing %s", key) {
			assert.Equal(t, want, v, key)
		}
	}
	assert.Equal(t, now, holds.now, "holds are counted as of the collector's clock")

	holds.counts["pending"] = 5
	assert.Equal(t, 5.0, scrape(t, c)[`svc_holds{status="pending"}`], "counted afresh at every scrape")
}

func TestFailingHoldCountLeavesOtherMetrics(t *testing.T) {
	c := metrics.New(metrics.Sources{Holds: &holdCounter{err: errors.New("database is locked")}})
	c.Decided("deny", "svc.policy/frozen", time.Millisecond)
	got := scrape(t, c)
	for key := range got {
		assert.False(t, strings.HasPrefix(key, "svc_holds"), "no hold figures when the count failed: %s", key)
	}
	assert.Equal(t, 1.0, got[`svc_decisions_total{rule="svc.policy/frozen",verdict="deny"}`])
	// The handler counts a failed gathering after serving it: the next
	// scrape shows it.
	assert.Equal(t, 1.0, scrape(t, c)[`promhttp_metric_handler_errors_total{cause="gathering"}`])
}

// pack is a PackSource whose staleness a test sets.
type pack struct{ stale bool }

func (p *pack) PackStatus() (bool, error) {
	if p.stale {
		return true, errors.New("rego_parse_error")
	}
	return false, nil
}

func TestPolicyPackStale(t *testing.T) {
	p := &pack{}
	c := metrics.New(metrics.Sources{Pack: p})
	assert.Equal(t, 0.0, scrape(t, c)["svc_policy_pack_stale"])
	p.stale = true
	assert.Equal(t, 1.0, scrape(t, c)["svc_policy_pack_stale"], "read at every scrape")
	_, reported := scrape(t, metrics.New(metrics.Sources{}))["svc_policy_pack_stale"]
	assert.False(t, reported, "not reported when the evaluator cannot keep a stale pack")
}
