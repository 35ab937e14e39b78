package engine_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/api"
)

// holdServer serves the engine's routes over p's real stores, with a
// pending hold raised by a decision, and returns the server and the hold.
func holdServer(t *testing.T) (*api.Server, *httptest.Server, string) {
	t.Helper()
	return holdServerWith(t, api.ServerConfig{MaxBodyBytes: 1 << 20})
}

// holdServerWith is holdServer with the server's settings.
func holdServerWith(t *testing.T, cfg api.ServerConfig) (*api.Server, *httptest.Server, string) {
	t.Helper()
	p := newPipeline(t, realOPA(t), nil)
	held := p.decideIn(t, "s", "delete", 1, "production", "irreversible", "broad")
	require.Equal(t, engine.RequireApproval, held.Decision)
	srv := api.NewServer(cfg,
		api.ServerDeps{Engine: p.engine, Holds: p.holds, Logger: zerolog.Nop()})
	return srv, httptest.NewServer(srv.Handler()), held.HoldID
}

// closeWithin closes ts, which waits for its handlers, and fails the test
// when that takes longer than limit (a wait still running).
func closeWithin(t *testing.T, ts *httptest.Server, limit time.Duration) {
	t.Helper()
	closed := make(chan struct{})
	go func() { ts.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(limit):
		t.Fatalf("a hold wait still runs %s after it should have ended", limit)
	}
}

// A client that goes away ends its wait: the handler returns, and the
// server closes without waiting for the 300 s.
func TestHoldWaitEndsWhenTheClientLeaves(t *testing.T) {
	_, ts, id := holdServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", ts.URL+"/v1/holds/"+id+"?wait=300", nil)
	require.NoError(t, err)
	failed := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		failed <- err
	}()
	time.Sleep(300 * time.Millisecond)
	cancel()
	require.ErrorIs(t, <-failed, context.Canceled)
	closeWithin(t, ts, 60*time.Second)
}

// EndHoldWaits (a server shutting down) answers every wait at once with
// its hold as it stands.
func TestEndHoldWaitsAnswersPending(t *testing.T) {
	srv, ts, id := holdServer(t)
	answered := make(chan map[string]any, 1)
	go func() {
		resp, err := http.Get(ts.URL + "/v1/holds/" + id + "?wait=300")
		if err != nil {
			answered <- map[string]any{"error": err.Error()}
			return
		}
		defer resp.Body.Close()
		body := map[string]any{}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		answered <- body
	}()
	time.Sleep(300 * time.Millisecond)
	srv.EndHoldWaits()
	select {
	case body := <-answered:
		assert.Equal(t, engine.HoldPending, body["status"])
		assert.Equal(t, id, body["id"])
	case <-time.After(60 * time.Second):
		t.Fatal("the wait did not end with EndHoldWaits")
	}
	closeWithin(t, ts, 60*time.Second)
}

// Past MaxHoldWaiters long-polls a wait is answered at once, as wait=0,
// with its connection closed, so that waiters cannot take every
// connection from decisions.
func TestHoldWaitersAreBounded(t *testing.T) {
	srv, ts, id := holdServerWith(t, api.ServerConfig{MaxBodyBytes: 1 << 20, MaxHoldWaiters: 1})
	first := make(chan error, 1)
	go func() {
		resp, err := http.Get(ts.URL + "/v1/holds/" + id + "?wait=300")
		if err == nil {
			resp.Body.Close()
		}
		first <- err
	}()
	time.Sleep(300 * time.Millisecond) // the first wait holds the slot
	start := time.Now()
	resp, err := http.Get(ts.URL + "/v1/holds/" + id + "?wait=300")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Less(t, time.Since(start), 30*time.Second, "answered at once, not after the wait")
	assert.True(t, resp.Close, "the connection is closed")
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))

	srv.EndHoldWaits() // frees the slot
	require.NoError(t, <-first)
	closeWithin(t, ts, 60*time.Second)
}
