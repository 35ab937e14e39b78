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
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
)

func openLog(t *testing.T, fsync bool) (*decisionLog, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "decisions.jsonl")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
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

func TestDecisionLogFailureSticks(t *testing.T) {
	l, _ := openLog(t, true)
	require.NoError(t, l.f.Close())
	v := engine.Verdict{Decision: "allow", Rule: "r"}
	require.Error(t, l.append([]byte(`{}`), v))
	require.Error(t, l.append([]byte(`{}`), v), "a failed log fails every later answer")
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
