package cmd_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/metrics/metricstest"
)

// scrapeMetrics fetches the engine's /metrics with its token.
func (p *engineProc) scrapeMetrics(t *testing.T) map[string]float64 {
	t.Helper()
	return metricstest.Scrape(t, p.URL+"/metrics", p.token)
}

func TestMetricsCountersMove(t *testing.T) {
	p := startEngine(t, baseEnv(t))
	before := p.scrapeMetrics(t)
	assert.Equal(t, 0.0, before[`svc_holds{status="pending"}`])

	p.decide(t, envelope(nil))
	p.decide(t, envelope(nil))
	approval := p.decide(t, envelope(map[string]any{"action.verb": "delete", "target.environment": "production",
		"axes.reversibility": "irreversible", "axes.blast_radius": "broad"}))
	require.Equal(t, "require_approval", approval.str("decision"))
	deny := p.decide(t, envelope(map[string]any{"action.verb": "delete", "target.environment": "production",
		"axes.reversibility": "irreversible", "axes.blast_radius": "systemic"}))
	require.Equal(t, "deny", deny.str("decision"))

	after := p.scrapeMetrics(t)
	for key, moved := range map[string]float64{
		`svc_decisions_total{rule="svc.policy/read_only_internal",verdict="allow"}`:                 2,
		`svc_decisions_total{rule="svc.policy/irreversible_broad_prod",verdict="require_approval"}`: 1,
		`svc_decisions_total{rule="svc.policy/irreversible_systemic_prod",verdict="deny"}`:          1,
		"svc_decide_duration_seconds_count":                                                         4,
		"svc_opa_evaluation_duration_seconds_count":                                                 4,
		"svc_opa_evaluation_failures_total":                                                         0,
		`svc_holds{status="pending"}`:                                                               1,
		`svc_holds{status="approved"}`:                                                              0,
	} {
		_, present := after[key]
		assert.True(t, present, "missing %s", key)
		assert.Equal(t, moved, after[key]-before[key], key)
	}
	assert.Greater(t, after["svc_decide_duration_seconds_sum"], before["svc_decide_duration_seconds_sum"])
	assert.Positive(t, after["process_resident_memory_bytes"])
	for key := range after {
		assert.False(t, strings.HasPrefix(key, "svc_export_"), "%s without any export configured", key)
	}
}

func TestMetricsCountOPAFailures(t *testing.T) {
	p, inject, _ := faultyOPA(t)
	require.Equal(t, "allow", p.decide(t, envelope(nil)).str("decision"))
	inject("garbage")
	require.Equal(t, "deny", p.decide(t, envelope(nil)).str("decision"))

	got := p.scrapeMetrics(t)
	assert.Equal(t, 1.0, got["svc_opa_evaluation_failures_total"])
	assert.Equal(t, 2.0, got["svc_opa_evaluation_duration_seconds_count"])
	assert.Equal(t, 1.0, got[`svc_decisions_total{rule="svc.core/internal_error",verdict="deny"}`])
}

func TestMetricsNeedTheToken(t *testing.T) {
	env := baseEnv(t)
	env["SVC_AUTH_TOKEN"] = "s3cret-token-for-metrics"
	p := startEngine(t, env)
	assert.Equal(t, http.StatusUnauthorized, p.callAs(t, "", "GET", "/metrics", nil).Status)
	assert.Contains(t, p.scrapeMetrics(t), "svc_decide_duration_seconds_count")
}
