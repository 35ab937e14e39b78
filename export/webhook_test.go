package export

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
)

const testSecret = "whsec-test-3f9a"

// hookServer is a real HTTP receiver that records each POST and answers
// with the next scripted status (200 once the script runs out).
type hookServer struct {
	*httptest.Server
	mu       sync.Mutex
	statuses []int
	got      []hookRequest
}

type hookRequest struct {
	header http.Header
	body   []byte
	at     time.Time
}

func startHookServer(t *testing.T, statuses ...int) *hookServer {
	t.Helper()
	h := &hookServer{statuses: statuses}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.got = append(h.got, hookRequest{header: r.Header.Clone(), body: body, at: time.Now()})
		status := http.StatusOK
		if len(h.statuses) > 0 {
			status, h.statuses = h.statuses[0], h.statuses[1:]
		}
		h.mu.Unlock()
		if r.Method != http.MethodPost {
			status = http.StatusMethodNotAllowed
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookServer) requests() []hookRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookRequest(nil), h.got...)
}

// verify is what a receiver does: recompute the HMAC over the timestamp
// header, a dot and the raw body, compare in constant time, and refuse
// stale timestamps.
func verify(secret string, r hookRequest, now time.Time) bool {
	ts := r.header.Get("X-Svc-Timestamp")
	sig, ok := strings.CutPrefix(r.header.Get("X-Svc-Signature"), "sha256=")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if !ok || err != nil || now.Sub(time.Unix(sec, 0)).Abs() > 5*time.Minute {
		return false
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "." + string(r.body)))
	want := hex.EncodeToString(mac.Sum(nil))
	return hmac.Equal([]byte(want), []byte(sig))
}

func holdCreated() engine.HoldEvent {
	return engine.HoldEvent{
		Event: engine.EventHoldCreated, TS: "2026-01-02T03:04:05.123Z", HoldID: "hold-42",
		RuleID: "svc.policy/bulk_delete", Status: engine.HoldPending, ExpiresTS: "2026-01-02T07:04:05.123Z",
		DecisionID: "0f8fad5bd9cb469fa16570867728950e", SessionID: "sess-1", AgentID: "agent-7",
		Reason: "bulk delete — 250 objects ✓",
	}
}

func TestWebhookDeliversSignedEvents(t *testing.T) {
	verified := true
	resolved := holdCreated()
	resolved.Event, resolved.Status = engine.EventHoldResolved, engine.HoldApproved
	resolved.DecidedBy = &engine.Principal{Type: "human", ID: "carol"}
	resolved.DecidedByVerified = &verified
	expired := holdCreated()
	expired.Event, expired.Status = engine.EventHoldExpired, engine.HoldExpired
	freeze := engine.FreezeEvent{Event: engine.EventFreezeFlipped, TS: "2026-01-02T03:04:05.123Z", Frozen: true, Reason: "incident", By: "human:carol"}
	events := []engine.Event{
		{Type: engine.EventHoldCreated, Body: holdCreated()},
		{Type: engine.EventHoldResolved, Body: &resolved},
		{Type: engine.EventHoldExpired, Body: expired},
		{Type: engine.EventFreezeFlipped, Body: freeze},
	}
	srv := startHookServer(t)
	ex := newTestExporter(t, Config{Webhook: WebhookConfig{URL: srv.URL + "/hooks/svc", Secret: testSecret}})
	for _, ev := range events {
		ex.Publish(ev)
	}
	require.NoError(t, ex.Close())
	require.Equal(t, QueueStats{Enabled: true, QueueCapacity: DefaultQueueSize, Sent: 4}, ex.Stats().Webhook)
	got := srv.requests()
	require.Len(t, got, len(events))
	for i, ev := range events {
		assert.True(t, verify(testSecret, got[i], time.Now()), "signature of %s", ev.Type)
		assert.False(t, verify("another-secret", got[i], time.Now()), "a wrong secret must not verify")
		tampered := got[i]
		tampered.body = bytes.Replace(tampered.body, []byte(`"hold-42"`), []byte(`"hold-43"`), 1)
		if ev.Type != engine.EventFreezeFlipped {
			assert.False(t, verify(testSecret, tampered, time.Now()), "a changed body must not verify")
		}
		assert.Equal(t, "application/json", got[i].header.Get("Content-Type"))
		assert.Equal(t, ev.Type, got[i].header.Get("X-Svc-Event"))
		assert.JSONEq(t, string(mustMarshal(t, ev.Body)), string(got[i].body))
	}
	assert.Contains(t, string(got[1].body), `"decided_by":{"type":"human","id":"carol"}`)
}

func TestWebhookRetries(t *testing.T) {
	tests := []struct {
		name     string
		statuses []int
		attempts int
		sent     bool
	}{
		{name: "5xx then success", statuses: []int{503, 500}, attempts: 3, sent: true},
		{name: "429 is retried", statuses: []int{429}, attempts: 2, sent: true},
		{name: "5xx until attempts run out", statuses: []int{502, 502, 502, 502}, attempts: 3},
		{name: "4xx is final", statuses: []int{400}, attempts: 1},
		{name: "redirect is not followed", statuses: []int{302}, attempts: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startHookServer(t, tt.statuses...)
			ex := newTestExporter(t, Config{Webhook: WebhookConfig{
				URL: srv.URL, Secret: testSecret, RetryBackoff: 20 * time.Millisecond,
			}})
			ex.Publish(engine.Event{Type: engine.EventHoldCreated, Body: holdCreated()})
			require.NoError(t, ex.Close())
			got := srv.requests()
			require.Len(t, got, tt.attempts)
			for i, r := range got {
				assert.True(t, verify(testSecret, r, time.Now()), "attempt %d is signed", i+1)
				if i > 0 {
					wait := r.at.Sub(got[i-1].at)
					assert.GreaterOrEqual(t, wait, 20*time.Millisecond<<(i-1), "backoff before attempt %d", i+1)
				}
			}
			st := ex.Stats().Webhook
			if tt.sent {
				assert.Equal(t, uint64(1), st.Sent)
				assert.Zero(t, st.Errors)
			} else {
				assert.Zero(t, st.Sent)
				assert.Equal(t, uint64(1), st.Errors)
			}
		})
	}
}

// TestWebhookUnreachable: connection errors are retried, counted and
// logged without the URL, which may carry a token.
func TestWebhookUnreachable(t *testing.T) {
	var logs bytes.Buffer
	url := "http://" + deadAddress(t, ProtocolTCP) + "/hook?token=sekrit-token"
	ex, err := New(Config{Webhook: WebhookConfig{URL: url, Secret: testSecret, RetryBackoff: 10 * time.Millisecond}},
		zerolog.New(&logs))
	require.NoError(t, err)
	t.Cleanup(func() { _ = ex.Close() })
	var lat latencies
	lat.publish(ex, engine.Event{Type: engine.EventHoldCreated, Body: holdCreated()})
	lat.assertFast(t)
	require.NoError(t, ex.Close())
	assert.Equal(t, uint64(1), ex.Stats().Webhook.Errors)
	assert.Contains(t, logs.String(), "connection refused")
	assert.NotContains(t, logs.String(), "sekrit")
	assert.NotContains(t, logs.String(), testSecret)
}

// TestWebhookSlowReceiver: a receiver that never answers cannot slow
// Publish; the queue overflows into the drop counter and Close is bounded.
func TestWebhookSlowReceiver(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	ex := newTestExporter(t, Config{DrainTimeout: 200 * time.Millisecond, Webhook: WebhookConfig{URL: srv.URL, QueueSize: 8}})
	const published = 100
	var lat latencies
	for range published {
		lat.publish(ex, engine.Event{Type: engine.EventHoldCreated, Body: holdCreated()})
	}
	lat.assertFast(t)
	assert.Positive(t, ex.Stats().Webhook.Dropped)
	start := time.Now()
	require.NoError(t, ex.Close())
	assert.Less(t, time.Since(start), 2*time.Second)
	assertAccounted(t, ex.Stats().Webhook, published)
}

func TestWebhookWithoutSecretIsUnsigned(t *testing.T) {
	srv := startHookServer(t)
	ex := newTestExporter(t, Config{Webhook: WebhookConfig{URL: srv.URL}})
	ex.Publish(engine.Event{Type: engine.EventHoldCreated, Body: holdCreated()})
	require.NoError(t, ex.Close())
	got := srv.requests()
	require.Len(t, got, 1)
	assert.Empty(t, got[0].header.Get("X-Svc-Signature"))
	assert.Empty(t, got[0].header.Get("X-Svc-Timestamp"))
}

// TestSignKnownVector pins the signature format to a value computed
// outside Go: printf '1767323045.{"a":1}' | openssl dgst -sha256 -hmac whsec-test-3f9a
func TestSignKnownVector(t *testing.T) {
	require.Equal(t, "afcdba54c1e5787da1f3431b2d066e00d2a49b76e051d25e0b7fda9b865211a7", sign(testSecret, "1767323045", []byte(`{"a":1}`)))
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// TestWebhookHostileValues: hold and freeze events carrying hostile values
// (an approver's reason, the agent's ids) are each one POST whose body is
// valid JSON reading back every value, signed over the exact bytes sent.
func TestWebhookHostileValues(t *testing.T) {
	for _, h := range hostileTexts() {
		t.Run(h.name, func(t *testing.T) {
			hold := holdCreated()
			hold.SessionID, hold.AgentID, hold.Ability, hold.Reason = h.value, h.value, h.value, h.value
			hold.DecidedBy = &engine.Principal{Type: "human", ID: h.value}
			freeze := engine.FreezeEvent{Event: engine.EventFreezeFlipped, TS: hold.TS, Frozen: true, Reason: h.value, By: h.value}
			events := []engine.Event{{Type: engine.EventHoldResolved, Body: hold}, {Type: engine.EventFreezeFlipped, Body: freeze}}
			srv := startHookServer(t)
			ex := newTestExporter(t, Config{Webhook: WebhookConfig{URL: srv.URL, Secret: testSecret}})
			for _, ev := range events {
				ex.Publish(ev)
			}
			require.NoError(t, ex.Close())
			got := srv.requests()
			require.Len(t, got, len(events), "one POST per event")
			for i, ev := range events {
				assert.True(t, verify(testSecret, got[i], time.Now()), "signature over the bytes received")
				assert.True(t, utf8.Valid(got[i].body))
				var body map[string]any
				require.NoError(t, json.Unmarshal(got[i].body, &body))
				assert.Equal(t, mustJSON(t, ev.Body), body)
			}
		})
	}
}
