package cmd

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
)

// TestBenchWrkEnvelopes runs wrk with svc bench's script against a server
// that records what it is sent: each body is byte for byte the envelope
// the built-in client would send for its kind, session, sequence number
// and count, every kind of the mix is drawn, sessions are the run's, and
// the answers are tallied by verdict, a body without a decision_id as an
// error.
func TestBenchWrkEnvelopes(t *testing.T) {
	wrk, err := exec.LookPath("wrk")
	require.NoError(t, err, "wrk is missing: run scripts/install-test-deps")
	var mu sync.Mutex
	var bodies [][]byte
	answers := []string{`{"decision":"allow","decision_id":"d"}`, `{"decision":"require_approval","decision_id":"d"}`,
		`{"decision":"deny","decision_id":"d"}`, `{"decision":"allow","decision_id":""}`}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		assert.Equal(t, "/v1/decide", r.URL.Path)
		assert.Equal(t, http.MethodPost, r.Method)
		assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
		assert.Equal(t, "Bearer tok", r.Header.Get("Authorization"))
		mu.Lock()
		bodies = append(bodies, body)
		answer := answers[len(bodies)%len(answers)]
		mu.Unlock()
		_, _ = io.WriteString(w, answer)
	}))
	defer srv.Close()

	w, err := newWrkRunner(benchParams{url: srv.URL, token: "tok", sessions: 7, wrkBin: wrk, duration: time.Second})
	require.NoError(t, err)
	defer func() { _ = w.Close() }()
	r, err := w.drive(t.Context(), 2, "rt", time.Second)
	require.NoError(t, err)

	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, bodies)
	kinds := map[string]bool{}
	for _, body := range bodies {
		k, session, seq, count := wrkEnvelopeValues(t, body)
		assert.Regexp(t, `^rt-[0-6]$`, session)
		assert.True(t, count >= 1 && count <= k.maxCount, "count %d of %s", count, body)
		require.Equal(t, string(benchEnvelope(nil, k, session, seq, count)), string(body))
		kinds[k.verb+"/"+k.environment+"/"+k.blast] = true
	}
	if len(bodies) > 500 { // a kind of 5 % is then drawn with near certainty
		assert.Len(t, kinds, len(benchMix), "every kind of the mix is drawn")
	}
	assert.Equal(t, 2, r.inFlight)
	answered := r.verdicts[engine.Allow] + r.verdicts[engine.RequireApproval] + r.verdicts[engine.Deny]
	assert.Equal(t, r.decisions(), answered)
	assert.Positive(t, r.verdicts[engine.RequireApproval])
	assert.Positive(t, r.errors, "an answer without a decision_id is an error")
	assert.InDelta(t, len(bodies), answered+r.errors, 2, "every answer counted, bar those in flight at the end")
	assert.Positive(t, r.quantile(0))
}

// wrkEnvelopeValues reads back the kind, session, sequence number and count
// of an envelope of the mix.
func wrkEnvelopeValues(t *testing.T, body []byte) (benchKind, string, int, int) {
	t.Helper()
	var e struct {
		Agent struct {
			SessionID string `json:"session_id"`
		} `json:"agent"`
		Action    struct{ Verb string }        `json:"action"`
		Target    struct{ Environment string } `json:"target"`
		Params    struct{ Seq int }            `json:"params"`
		Magnitude struct{ Count int }          `json:"magnitude"`
	}
	require.NoError(t, json.Unmarshal(body, &e), "%s", body)
	var blast struct {
		Axes struct {
			BlastRadius string `json:"blast_radius"`
		} `json:"axes"`
	}
	require.NoError(t, json.Unmarshal(body, &blast))
	for _, k := range benchMix {
		if k.verb == e.Action.Verb && k.environment == e.Target.Environment && k.blast == blast.Axes.BlastRadius {
			return k, e.Agent.SessionID, e.Params.Seq, e.Magnitude.Count
		}
	}
	t.Fatalf("no kind of the mix matches %s", body)
	return benchKind{}, "", 0, 0
}

// TestParseWrkSummary reads the summary line among wrk's own output and
// refuses output without one or with a value that is not a number.
func TestParseWrkSummary(t *testing.T) {
	r, err := parseWrkSummary([]byte("Running 1s test @ http://x\n" + wrkSummaryPrefix +
		"allow=5 approval=2 deny=1 errors=3 duration=1000000 p50=900 p90=1500 p99=3000\nRequests/sec: 8\n"))
	require.NoError(t, err)
	assert.Equal(t, 8, r.decisions())
	assert.Equal(t, 8, r.answered)
	assert.Equal(t, 3, r.errors)
	assert.Equal(t, time.Second, r.elapsed)
	assert.Equal(t, []time.Duration{900 * time.Microsecond, 1500 * time.Microsecond, 3 * time.Millisecond},
		[]time.Duration{r.quantile(0), r.quantile(1), r.quantile(2)})
	assert.Equal(t, map[string]int{engine.Allow: 5, engine.RequireApproval: 2, engine.Deny: 1}, r.verdicts)

	_, err = parseWrkSummary([]byte("Running 1s test\n"))
	require.ErrorContains(t, err, "printed no")
	_, err = parseWrkSummary([]byte(wrkSummaryPrefix + "allow=x\n"))
	require.ErrorContains(t, err, "allow is not a number")
	assert.Equal(t, "2s", wrkSeconds(1500*time.Millisecond))
	assert.Equal(t, "1s", wrkSeconds(10*time.Millisecond))
	assert.True(t, strings.HasPrefix(wrkMixLua(), "mix = {\n  {share=55, verb=\"read\""), wrkMixLua())
}

// TestBenchWrkSlowEngine: a warm-up in which a slow engine (eval mode on a
// busy machine) answers nothing is no error, and the timed run still
// counts its answers; a timed run without any answer is an error.
func TestBenchWrkSlowEngine(t *testing.T) {
	wrk, err := exec.LookPath("wrk")
	require.NoError(t, err, "wrk is missing: run scripts/install-test-deps")
	var delay atomic.Int64
	delay.Store(int64(1500 * time.Millisecond))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // then the server notices wrk hanging up (r.Context())
		select {
		case <-time.After(time.Duration(delay.Load())):
			_, _ = io.WriteString(w, `{"decision":"allow","decision_id":"d"}`)
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()

	w, err := newWrkRunner(benchParams{url: srv.URL, sessions: 1, wrkBin: wrk, duration: 3 * time.Second})
	require.NoError(t, err)
	defer func() { _ = w.Close() }()
	r, err := w.run(t.Context(), 1, "slow")
	require.NoError(t, err)
	assert.Positive(t, r.decisions())
	assert.Equal(t, r.decisions(), r.answered, "the warm-up answered none")

	delay.Store(int64(time.Minute))
	w.p.duration = time.Second
	_, err = w.run(t.Context(), 1, "stuck")
	require.ErrorIs(t, err, errWrkNoAnswer)
}
