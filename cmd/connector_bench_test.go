package cmd_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svc-dev/svc/cmd"
	"github.com/svc-dev/svc/rego"
)

// BenchmarkConnectorAddedLatency measures, in one run against one engine
// (OPA server mode, default durability), the latency of a direct
// POST /v1/decide and of a guardrail call through `svc connector` carrying
// one tool call that reads the same way, at 1 and 16 concurrent callers.
// The connector's added latency per tool call is the difference of the two
// p50s (docs/performance.md). Run: go test -run '^$' -bench ConnectorAddedLatency ./cmd
func BenchmarkConnectorAddedLatency(b *testing.B) {
	for _, durability := range []string{"full", "os"} {
		b.Run("durability="+durability, func(b *testing.B) { benchConnector(b, durability) })
	}
}

// benchConnector runs the comparison with engine and connector under one
// SVC_DURABILITY; each caller has a session of its own, so that callers
// do not queue behind each other's session. The engine runs the bundled
// pack with its object budgets raised out of reach: with the shipped ones
// a session's 201st read, and the 1,001st of the gateway's agent, is held,
// and every later call would measure a hold (and, through the connector, a
// second request to read it) rather than the allowed read it means to.
func benchConnector(b *testing.B, durability string) {
	engine, _ := holdsEngine(b, map[string]string{"SVC_OPA_MODE": "server", "SVC_DURABILITY": durability,
		"SVC_POLICY_DIR": unlimitedObjectsPack(b)})
	env := connectorEnv(b, engine.URL)
	env["SVC_DURABILITY"] = durability
	conn := startConnector(b, env)
	var directs, guardrails [16][]byte
	for i := range 16 {
		session := fmt.Sprintf("bench-%d", i)
		directs[i] = mustJSON(b, envelope(map[string]any{"agent.id": "gateway:acme/gpt-4o-2024-08-06",
			"agent.on_behalf_of": "human:support-lead", "agent.session_id": "gateway:acme:" + session,
			"action.namespace": "gateway", "action.ability": "gateway/crm_get_customer", "target.environment": "production",
			"params": map[string]any{"customer_id": "cus_88412"}}))
		g := fixture(b, "01_post_call_single_read_tool_call.json")
		g["litellm_trace_id"] = session
		guardrails[i] = mustJSON(b, g)
	}
	targets := []struct {
		name string
		send func(b *testing.B, c *http.Client, session int)
	}{
		{"decide", func(b *testing.B, c *http.Client, session int) {
			post(b, c, engine.URL+"/v1/decide", "adapter-token", "", directs[session], `"decision":"allow"`)
		}},
		{"connector", func(b *testing.B, c *http.Client, session int) {
			post(b, c, conn.URL+"/beta/litellm_basic_guardrail_api", "", connectorToken, guardrails[session],
				`{"action":"NONE"}`)
		}},
	}
	for _, callers := range []int{1, 16} {
		for _, tg := range targets {
			b.Run(fmt.Sprintf("%s/callers=%d", tg.name, callers), func(b *testing.B) {
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: callers}}
				tg.send(b, client, 0) // warm the connections
				lat := make([][]time.Duration, callers)
				engineCPU, connectorCPU := processCPU(b, engine), processCPU(b, conn)
				b.ResetTimer()
				var wg sync.WaitGroup
				for w := range callers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := w; i < b.N; i += callers {
							start := time.Now()
							tg.send(b, client, w)
							lat[w] = append(lat[w], time.Since(start))
						}
					}()
				}
				wg.Wait()
				b.StopTimer()
				b.ReportMetric(engineCPU()/float64(b.N), "engine-cpu-µs/op")
				b.ReportMetric(connectorCPU()/float64(b.N), "connector-cpu-µs/op")
				all := slices.Concat(lat...)
				slices.Sort(all)
				if len(all) > 0 {
					b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
					b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
				}
			})
		}
	}
}

// unlimitedObjectsPack writes the bundled policy pack with every object
// budget (session, agent, principal) raised out of reach, and returns its
// directory.
func unlimitedObjectsPack(b *testing.B) string {
	dir, cleanup, err := rego.Materialize()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cleanup() })
	path := filepath.Join(dir, "data.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	var data struct {
		Svc map[string]json.RawMessage `json:"svc"`
	}
	if err := json.Unmarshal(raw, &data); err != nil {
		b.Fatal(err)
	}
	for _, key := range []string{"thresholds", "agent_thresholds", "principal_thresholds"} {
		var limits map[string]int64
		if err := json.Unmarshal(data.Svc[key], &limits); err != nil || limits["objects"] == 0 {
			b.Fatalf("data.json: svc.%s.objects is not a limit (%v)", key, err)
		}
		limits["objects"] = 1 << 40
		data.Svc[key] = mustJSON(b, limits)
	}
	if err := os.WriteFile(path, mustJSON(b, data), 0o600); err != nil {
		b.Fatal(err)
	}
	return dir
}

// processCPU returns a function that gives the CPU time in µs p and its
// children (the engine's opa) have used since processCPU was called: on
// a shared machine the figure that holds still when wall times do not.
func processCPU(b *testing.B, p *engineProc) func() float64 {
	start, ok := cmd.ProcTreeCPU(p.cmd.Process.Pid)
	if !ok {
		b.Fatalf("cannot read the CPU time of pid %d", p.cmd.Process.Pid)
	}
	return func() float64 {
		now, _ := cmd.ProcTreeCPU(p.cmd.Process.Pid)
		return float64((now - start).Microseconds())
	}
}

// post sends body with a bearer or an x-api-key and fails b on an error
// status or an answer without want: each call is the allowed read it is
// meant to measure.
func post(b *testing.B, c *http.Client, u, bearer, key string, body []byte, want string) {
	req, err := http.NewRequest(http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if key != "" {
		req.Header.Set("x-api-key", key)
	}
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	raw := readAll(b, resp)
	if resp.StatusCode != 200 || !strings.Contains(raw, want) {
		b.Fatalf("%s answered %d, not %s: %s", u, resp.StatusCode, want, raw)
	}
}
