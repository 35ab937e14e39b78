package connector

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine/envelope"
)

// answering is an engine stand-in that answers every request with status
// and body: it injects answers the real engine never gives.
func answering(t *testing.T, status int, body string) *HTTPDecider {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "Bearer tok", r.Header.Get("Authorization"))
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	return NewHTTPDecider(u, "tok", true, 5*time.Second)
}

func validEnvelope() *envelope.Envelope {
	return &envelope.Envelope{
		Agent:     envelope.Agent{ID: "gateway:acme/m", SessionID: "s"},
		Action:    envelope.Action{Verb: "read", Ability: "gateway/x"},
		Target:    envelope.Target{Environment: "production"},
		Magnitude: envelope.Magnitude{Count: 1},
		Axes:      envelope.Axes{Reversibility: "reversible", BlastRadius: "single", Externality: "internal"},
	}
}

func TestHTTPDeciderAnswers(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
		want   string // decision, or "" for an error
	}{
		{"allow", 200, `{"decision": "allow", "rule": "r", "decision_id": "d1", "obligations": []}`, "allow"},
		{"allow without an id", 200, `{"decision": "allow", "rule": "r"}`, ""},
		{"allow without a rule", 200, `{"decision": "allow", "decision_id": "d1"}`, ""},
		{"hold without a decision id", 200, `{"decision": "require_approval", "rule": "r", "hold_id": "h"}`, ""},
		{"allow cut at the bound", 200, `{"decision": "allow", "rule": "r", "decision_id": "d1"}` +
			strings.Repeat(" ", maxAnswer) + `{"decision": "deny"}`, ""},
		{"allow as long as the bound", 200, `{"decision": "allow", "rule": "r", "decision_id": "d1"}` +
			strings.Repeat(" ", maxAnswer-len(`{"decision": "allow", "rule": "r", "decision_id": "d1"}`)), "allow"},
		{"engine's 500 deny", 500, `{"decision": "deny", "rule": "svc.core/internal_error"}`, "deny"},
		{"engine's 400 deny", 400, `{"decision": "deny", "error": "invalid_envelope", "field": "params.x"}`, "deny"},
		{"401", 401, `{"decision": "deny", "error": "unauthorized"}`, ""},
		{"500 without a deny", 502, `bad gateway`, ""},
		{"case variant", 200, `{"decision": "deny", "Decision": "allow"}`, ""},
		{"twice", 200, `{"decision": "deny", "decision": "allow"}`, ""},
		{"unknown decision", 200, `{"decision": "maybe"}`, ""},
		{"hold without id", 200, `{"decision": "require_approval"}`, ""},
		{"obligations", 200, `{"decision": "allow", "rule": "r", "decision_id": "d1", "obligations": ["redact"]}`, "allow"}, // judged by the Governor
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := answering(t, tc.status, tc.body).Decide(context.Background(), validEnvelope())
			if tc.want == "" {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, d.Decision)
		})
	}
	bad := validEnvelope()
	bad.Params = map[string]any{"n": json9007199254740993()}
	_, err := answering(t, 200, `{"decision": "allow"}`).Decide(context.Background(), bad)
	var inv *envelope.InvalidEnvelope
	require.ErrorAs(t, err, &inv, "an envelope the engine would refuse is not sent")
}

// TestHTTPDeciderFollowsNoRedirect: an engine URL that redirects elsewhere
// (a misconfigured proxy, a hostile one) is not followed with the envelope
// and the token; the redirect is not a decision.
func TestHTTPDeciderFollowsNoRedirect(t *testing.T) {
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		elsewhere.Add(1)
		_, _ = w.Write([]byte(`{"decision": "allow"}`))
	}))
	t.Cleanup(other.Close)
	redirecting := httptest.NewServer(http.RedirectHandler(other.URL+"/v1/decide", http.StatusTemporaryRedirect))
	t.Cleanup(redirecting.Close)
	u, err := url.Parse(redirecting.URL)
	require.NoError(t, err)
	_, err = NewHTTPDecider(u, "tok", true, 5*time.Second).Decide(context.Background(), validEnvelope())
	require.ErrorContains(t, err, "engine answered 307")
	assert.Zero(t, elsewhere.Load(), "the redirect is not followed")
}

// TestUnreachableErrorSaysLessInPublic: an engine out of reach is named
// with its URL and network error for the operator, and by the kind of
// failure alone for the gateway's client.
func TestUnreachableErrorSaysLessInPublic(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) })
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for srv, public := range map[*httptest.Server]string{slow: "engine unreachable (timed out)",
		closed: "engine unreachable (connection failed)"} {
		u, err := url.Parse(srv.URL)
		require.NoError(t, err)
		_, err = NewHTTPDecider(u, "tok", true, 200*time.Millisecond).Decide(context.Background(), validEnvelope())
		var ue *UnreachableError
		require.ErrorAs(t, err, &ue)
		assert.Equal(t, public, ue.Public())
		assert.NotContains(t, ue.Public(), u.Host)
		assert.Contains(t, ue.Error(), "engine unreachable at "+srv.URL)
	}
}

// TestAwaitHoldPollsAnEngineWithoutLongPoll: an engine that answers a
// pending hold at once is read again until the wait ends or it is decided.
func TestAwaitHoldPollsAnEngineWithoutLongPoll(t *testing.T) {
	var reads atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status := "pending"
		if reads.Add(1) >= 3 {
			status = "approved"
		}
		_, _ = w.Write([]byte(`{"id": "h", "status": "` + status + `"}`))
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	h, err := NewHTTPDecider(u, "", true, time.Second).AwaitHold(context.Background(), "h", 5*time.Second)
	require.NoError(t, err)
	assert.Equal(t, HoldApproved, h.Status)
	assert.Equal(t, int64(3), reads.Load())

	reads.Store(-1000)
	start := time.Now()
	h, err = NewHTTPDecider(u, "", true, time.Second).AwaitHold(context.Background(), "h", 600*time.Millisecond)
	require.NoError(t, err)
	assert.Equal(t, HoldPending, h.Status)
	assert.Less(t, time.Since(start), 3*time.Second)
}

// TestAwaitHoldRefusesAnUnknownStatus: a hold in a status the connector
// does not know (or none) is an engine fault, not a denial.
func TestAwaitHoldRefusesAnUnknownStatus(t *testing.T) {
	for _, body := range []string{`{"id": "h", "status": "weird"}`, `{"id": "h"}`, `{"id": "h", "status": "Approved"}`} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(body)) }))
		u, _ := url.Parse(srv.URL)
		_, err := NewHTTPDecider(u, "", true, time.Second).AwaitHold(context.Background(), "h", 0)
		require.ErrorContains(t, err, "unknown status", body)
		srv.Close()
	}
}
