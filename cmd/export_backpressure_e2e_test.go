package cmd_test

import (
	"net"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/export/exporttest"
)

func downCollector(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// medianDecide runs n decisions at concurrency 16 and returns the median
// latency.
func medianDecide(t *testing.T, p *engineProc, n int) time.Duration {
	t.Helper()
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	work := make(chan int)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				start := time.Now()
				r := p.decide(t, envelope(nil))
				d := time.Since(start)
				if r.Status != 200 {
					t.Errorf("decide answered %d: %v", r.Status, r.Body)
				}
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < n; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat[len(lat)/2]
}

func syslogDropped(t *testing.T, p *engineProc) float64 {
	t.Helper()
	h := p.call(t, "GET", "/healthz", nil)
	exp, _ := h.Body["export"].(map[string]any)
	sys, _ := exp["syslog"].(map[string]any)
	require.NotNil(t, sys, "%v", h.Body)
	dropped, _ := sys["dropped"].(float64)
	return dropped
}

func TestSlowOrDownCollectorNeverSlowsDecisions(t *testing.T) {
	const n = 1600 // more than the 1000-event queue
	baselineEnv := baseEnv(t)
	baselineEnv["SVC_OPA_MODE"] = "server"
	baseline := medianDecide(t, startEngine(t, baselineEnv), n)
	for name, addr := range map[string]string{"never reads": exporttest.StuckCollector(t, 1024), "down": downCollector(t)} {
		t.Run(name, func(t *testing.T) {
			env := baseEnv(t)
			env["SVC_OPA_MODE"] = "server"
			env["SVC_SYSLOG_ENABLED"] = "true"
			env["SVC_SYSLOG_PROTOCOL"] = "tcp"
			env["SVC_SYSLOG_ADDRESS"] = addr
			p := startEngine(t, env)
			median := medianDecide(t, p, n)
			dropped := syslogDropped(t, p)
			assert.Greater(t, dropped, float64(0), "a full queue drops and counts")
			m := p.scrapeMetrics(t)
			assert.GreaterOrEqual(t, m[`svc_export_dropped_total{destination="syslog"}`], dropped,
				"/metrics counts the drops /healthz reported")
			assert.Contains(t, m, `svc_export_queue_depth{destination="syslog"}`)
			assert.Positive(t, m[`svc_export_queue_capacity{destination="syslog"}`])
			// A blocked emit would cost a socket timeout or a reconnect backoff
			// (100 ms and up) per decision; allow generous noise beyond that.
			assert.Less(t, median, 3*baseline+60*time.Millisecond,
				"median decide latency %v against %v without syslog", median, baseline)
			t.Logf("median decide latency: %v (no syslog: %v)", median, baseline)
		})
	}
}
