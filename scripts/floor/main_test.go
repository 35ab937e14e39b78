package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/envelope"
)

// openLog opens a decision log in a temporary directory.
func openLog(t *testing.T, fsync bool) (*decisionLog, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "decisions.jsonl")
	f, err := openDecisionLog(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	return newDecisionLog(f, fsync), path
}

func TestDecisionLogGroupCommit(t *testing.T) {
	for _, flush := range []bool{true, false} {
		l, path := openLog(t, flush)
		var wg sync.WaitGroup
		for i := range 64 {
			wg.Go(func() {
				assert.NoError(t, l.append([]byte(`{"n":`+string(rune('0'+i%10))+`}`), engine.Verdict{Decision: "allow", Rule: "r"}))
			})
		}
		wg.Wait()
		f, err := os.Open(path)
		require.NoError(t, err)
		lines := 0
		for sc := bufio.NewScanner(f); sc.Scan(); lines++ {
			require.True(t, json.Valid(sc.Bytes()), sc.Text())
			require.Contains(t, sc.Text(), `"event":"decision"`)
		}
		require.NoError(t, f.Close())
		assert.Equal(t, 64, lines)
		assert.Equal(t, uint64(64), l.written)
		if flush {
			assert.Equal(t, l.written, l.durable, "every answered line flushed")
		}
	}
}

// TestDecisionLogFlushCoversOnlyEarlierLines: a line written while a flush
// runs is not on disk through that flush; its caller waits for the next one.
func TestDecisionLogFlushCoversOnlyEarlierLines(t *testing.T) {
	l, _ := openLog(t, true)
	entered, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	l.sync = func() error {
		if calls.Add(1) == 1 {
			close(entered)
			<-release
		}
		return nil
	}
	v := engine.Verdict{Decision: "allow", Rule: "r"}
	first, second := make(chan error), make(chan error)
	go func() { first <- l.append([]byte(`{}`), v) }()
	<-entered
	go func() { second <- l.append([]byte(`{}`), v) }()
	require.Eventually(t, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.written == 2
	}, 5*time.Second, time.Millisecond)
	close(release)
	require.NoError(t, <-first)
	require.NoError(t, <-second)
	assert.Equal(t, int32(2), calls.Load(), "the second line needed a flush of its own")
	assert.Equal(t, uint64(2), l.durable)
}

func TestDecisionLogFailureSticks(t *testing.T) {
	l, _ := openLog(t, true)
	var calls atomic.Int32
	l.sync = func() error {
		if calls.Add(1) == 1 {
			return assert.AnError
		}
		return nil
	}
	v := engine.Verdict{Decision: "allow", Rule: "r"}
	require.ErrorIs(t, l.append([]byte(`{}`), v), assert.AnError)
	require.ErrorIs(t, l.append([]byte(`{}`), v), assert.AnError, "a failed flush fails every later answer")
	assert.Equal(t, int32(1), calls.Load())
	assert.Equal(t, uint64(1), l.written, "nothing is written after a failure")
}

// stubEvaluator answers a fixed verdict, or an error.
type stubEvaluator struct {
	v   engine.Verdict
	err error
	got []byte
}

func (s *stubEvaluator) Evaluate(_ context.Context, input json.RawMessage) (engine.Verdict, error) {
	s.got = input
	return s.v, s.err
}

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ev     *stubEvaluator
		status int
	}{
		{"verdict", &stubEvaluator{v: engine.Verdict{Decision: "deny", Rule: "svc.policy/x"}}, http.StatusOK},
		{"evaluation fails", &stubEvaluator{err: assert.AnError}, http.StatusInternalServerError},
		{"envelope does not parse", &stubEvaluator{}, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := openLog(t, true)
			s := &server{ev: tc.ev, log: l}
			if tc.status == http.StatusBadRequest {
				rec := httptest.NewRecorder()
				s.decide(rec, httptest.NewRequest(http.MethodPost, "/v1/decide", strings.NewReader(`{"agent":{}}`)))
				require.Equal(t, tc.status, rec.Code, rec.Body.String())
				assert.Nil(t, tc.ev.got, "not evaluated")
				return
			}
			rec := httptest.NewRecorder()
			body := benchEnvelope(t)
			s.decide(rec, httptest.NewRequest(http.MethodPost, "/v1/decide", strings.NewReader(body)))
			require.Equal(t, tc.status, rec.Code)
			env, err := envelope.ParseEnvelope([]byte(body))
			require.NoError(t, err)
			want, err := engine.PolicyInputOf(env, engine.Cumulative{WindowSeconds: 3600}, false)
			require.NoError(t, err)
			require.JSONEq(t, string(want), string(tc.ev.got), "svc's input document, words included")
			require.Contains(t, string(tc.ev.got), `"action_words":["delete"`)
			if tc.status == http.StatusOK {
				assert.JSONEq(t, `{"decision_id":"1","decision":"deny","rule":"svc.policy/x"}`, rec.Body.String())
				assert.Equal(t, uint64(1), l.durable)
			} else {
				assert.Equal(t, uint64(0), l.written, "nothing logged for a failed evaluation")
			}
		})
	}
}

// benchEnvelope is a valid envelope: a production delete.
func benchEnvelope(t *testing.T) string {
	t.Helper()
	return `{"svc_version":"0.2","agent":{"id":"bench-1","on_behalf_of":"human:bench-1","session_id":"s1"},` +
		`"action":{"namespace":"db","verb":"delete","ability":"db/delete"},"target":{"kind":"table","ref":"bench.t1",` +
		`"environment":"production"},"params":{"seq":1},"magnitude":{"count":1},"axes":{"reversibility":"irreversible",` +
		`"blast_radius":"systemic","externality":"internal"},"approval":{"present":false,"hold_id":null},"context":{},` +
		`"meta":{"timestamp":"2026-01-01T00:00:00Z","nonce":"n1","signature":"stub"}}`
}
