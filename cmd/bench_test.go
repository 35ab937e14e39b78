package cmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
)

// TestBenchDecisionFields checks the two fields the client reads against a
// plain decode of encoding/json on bodies an engine, or a broken one, could
// send.
func TestBenchDecisionFields(t *testing.T) {
	cases := []struct {
		body, decision, id, errLike string
	}{
		{benchAllowBody, "allow", "0123456789abcdef0123456789abcdef", ""},
		{` { "decision_id" : "i" , "decision" : "deny" } `, "deny", "i", ""},
		{`{"a":{"decision":"x","decision_id":"y"},"b":["decision",{"c":"}"}],"decision":"allow","decision_id":"i"}`,
			"allow", "i", ""},
		{`{"n":-1.5e3,"t":true,"f":false,"z":null,"decision":"allow","decision_id":"i","e":{},"l":[]}`, "allow", "i", ""},
		{`{"decision":"al\"low\u00e9\\","decision_id":"i\/d"}`, "al\"lowé\\", "i/d", ""},
		{`{"decisio\u006e":"allow","decision_id":"i"}`, "allow", "i", ""},
		{`{"decision":"deny","decision":"allow","decision_id":"i","k":5}`, "allow", "i", ""},
		{`{"decision":"allow","decision_id":""}`, "allow", "", ""},
		{`{"decision":"allow"}`, "", "", "lacks decision or decision_id"},
		{`{"decision_id":"i"}`, "", "", "lacks decision or decision_id"},
		{`{"decision":null,"decision_id":"i"}`, "", "", `"decision" is not a string`},
		{`{"decision":"allow","decision_id":7}`, "", "", `"decision_id" is not a string`},
		{`{"decision":"allow","decision_id":{"x":"i"}}`, "", "", `"decision_id" is not a string`},
		{`["decision","allow"]`, "", "", "not a JSON object"},
		{`"decision"`, "", "", "not a JSON object"},
		{`{"decision":"allow","decision_id":"i"} {}`, "", "", "not JSON"},
		{`{"decision":"allow","decision_id":"i"`, "", "", "not JSON"},
		{`{"decision":"allow","decision_id":"i",}`, "", "", "not JSON"},
		{"", "", "", "not JSON"},
	}
	for _, c := range cases {
		t.Run(c.body, func(t *testing.T) {
			decision, id, err := decisionFields([]byte(c.body))
			if c.errLike != "" {
				require.ErrorContains(t, err, c.errLike)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.decision, decision)
			assert.Equal(t, c.id, id)
			var full struct {
				Decision   string `json:"decision"`
				DecisionID string `json:"decision_id"`
			}
			require.NoError(t, json.Unmarshal([]byte(c.body), &full))
			assert.Equal(t, full.Decision, decision, "as encoding/json")
			assert.Equal(t, full.DecisionID, id, "as encoding/json")
		})
	}
}

// TestBenchEnvelope checks the appended envelope against the fmt format it
// replaced, and that the engine accepts it.
func TestBenchEnvelope(t *testing.T) {
	for _, k := range benchMix {
		for _, seq := range []int{0, 7, 149} {
			session := fmt.Sprintf("r1-1763700000000000000w-%d", seq*3)
			want := fmt.Sprintf(`{"svc_version":"0.2","agent":{"id":"bench-agent","on_behalf_of":"human:bench",`+
				`"session_id":%q},"action":{"namespace":"db","verb":%q,"ability":"db/%s"},"target":{"kind":"table",`+
				`"ref":"bench.t%d","environment":%q},"params":{"seq":%d},"magnitude":{"count":%d},"axes":{`+
				`"reversibility":%q,"blast_radius":%q,"externality":%q},"approval":{"present":false,"hold_id":null},`+
				`"context":{},"meta":{"timestamp":"2026-01-01T00:00:00Z","nonce":"%s-%d","signature":"stub"}}`,
				session, k.verb, k.verb, seq%50, k.environment, seq, k.maxCount,
				k.reversibility, k.blast, k.ext, session, seq)
			got := benchEnvelope([]byte("old"), k, session, seq, k.maxCount)
			require.Equal(t, "old"+want, string(got))
			env, err := engine.ParseEnvelope(got[3:])
			require.NoError(t, err)
			assert.Equal(t, session, env.Agent.SessionID)
		}
	}
}

// BenchmarkBenchClient measures what one decide costs the load generator,
// raw and with net/http, against a canned loopback server: cpu-µs/op is
// the process's CPU time (the canned server's share included) per request.
//
//	go test -run '^$' -bench BenchClient -benchtime 20000x ./cmd
func BenchmarkBenchClient(b *testing.B) {
	reply := cannedReply("HTTP/1.1 200 OK", "", benchAllowBody)
	url := startCannedServer(b, func(int64) string { return reply })
	for _, name := range []string{"raw", "net-http"} {
		b.Run(name, func(b *testing.B) {
			c, err := newBenchClient(benchParams{url: url, concurrency: []int{1}})
			require.NoError(b, err)
			if name == "net-http" {
				c.target, c.http = nil, newBenchHTTP(1)
			}
			d := c.deciders(1)[0]
			defer func() { _ = c.Close() }()
			envelope := benchEnvelope(nil, benchMix[0], "bench-1", 1, 1)
			b.ReportAllocs()
			cpu := processCPU(b)
			for b.Loop() {
				if _, err := d.decide(b.Context(), envelope); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N)/1e3, "cpu-µs/op")
		})
	}
}

// BenchmarkBenchEnvelope measures the formatting of one envelope.
func BenchmarkBenchEnvelope(b *testing.B) {
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		buf = benchEnvelope(buf[:0], benchMix[3], "r0-1763700000000000000-123", 4567, 3)
	}
}

// processCPU is the user and system CPU time of the process so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkBenchDecisionFields compares reading the two fields of an answer
// with the json.Decoder the client used before.
func BenchmarkBenchDecisionFields(b *testing.B) {
	body := []byte(`{"decision":"allow","reason":"read of internal staging data","rule":"svc.policy/read_only_internal",` +
		`"obligations":[],"modulation":null,"decision_id":"0123456789abcdef0123456789abcdef","envelope_hash":` +
		`"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08","verb":"read","raw_verb":"read",` +
		`"environment":"staging","raw_environment":"staging"}` + "\n")
	b.Run("fields", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, id, err := decisionFields(body); err != nil || id == "" {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Decoder", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var d struct {
				Decision   string `json:"decision"`
				DecisionID string `json:"decision_id"`
			}
			if err := json.NewDecoder(bytes.NewReader(body)).Decode(&d); err != nil || d.DecisionID == "" {
				b.Fatal(err)
			}
		}
	})
}
