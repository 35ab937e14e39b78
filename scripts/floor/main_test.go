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
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := openLog(t, true)
			s := &server{ev: tc.ev, log: l}
			rec := httptest.NewRecorder()
			s.decide(rec, httptest.NewRequest(http.MethodPost, "/v1/decide", strings.NewReader(`{"agent":{}}`)))
			require.Equal(t, tc.status, rec.Code)
			require.JSONEq(t, `{"envelope":{"agent":{}},"cumulative":{"window_seconds":3600,"deletes":0,"external_sends":0,"objects":0},"frozen":false}`, string(tc.ev.got))
			if tc.status == http.StatusOK {
				assert.JSONEq(t, `{"decision_id":"1","decision":"deny","rule":"svc.policy/x"}`, rec.Body.String())
				assert.Equal(t, uint64(1), l.durable)
			} else {
				assert.Equal(t, uint64(0), l.written, "nothing logged for a failed evaluation")
			}
		})
	}
}
