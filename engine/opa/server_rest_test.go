package opa

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/svc-dev/svc/engine"
)

// fakeOPAServer answers every request with handler: for faults a real OPA
// cannot produce (garbage, floods, stalls, redirects).
func fakeOPAServer(t *testing.T, handler http.HandlerFunc) *RESTEvaluator {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	ev, err := NewRESTEvaluator(srv.URL, 500*time.Millisecond)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, ev.Close()) })
	return ev
}

func opaAnswer(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// opaStall never answers. It reads the body first: only then does the server
// notice the client hang up and cancel the request.
func opaStall(_ http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	<-r.Context().Done()
}

func TestRESTEvaluatorFaults(t *testing.T) {
	verdict := `{"decision":"deny","rule":"svc.policy/frozen","reason":"frozen"}`
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    string // "" means the frozen verdict
	}{
		{"valid", opaAnswer(200, `{"result":`+verdict+`}`), ""},
		{"valid with extra fields", opaAnswer(200, `{"decision_id":"x","result":`+verdict+`,"metrics":{}}`), ""},
		{"undefined", opaAnswer(200, `{}`), "policy decision is undefined"},
		{"null result", opaAnswer(200, `{"result":null}`), "lacks decision, rule or reason"},
		{"garbage", opaAnswer(200, `<html>`), "parse opa server answer"},
		{"trailing garbage", opaAnswer(200, `{"result":`+verdict+`} x`), "parse opa server answer"},
		{"empty body", opaAnswer(200, ``), "parse opa server answer"},
		{"string result", opaAnswer(200, `{"result":"allow"}`), "not an object of strings"},
		{"unknown decision", opaAnswer(200, `{"result":{"decision":"ALLOW","rule":"r","reason":"x"}}`), "invalid"},
		{"empty rule", opaAnswer(200, `{"result":{"decision":"allow","rule":"","reason":"x"}}`), "invalid"},
		{"server error", opaAnswer(500, `{"code":"internal_error","message":"boom"}`), `500 Internal Server Error: {"code":"internal_error","message":"boom"}`},
		{"verdict with 404", opaAnswer(404, `{"result":`+verdict+`}`), "404 Not Found"},
		{"flood", opaAnswer(200, `{"result":"`+strings.Repeat("a", opaMaxOutput)+`"}`), "exceeds"},
		{"redirect", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
		}, "307 Temporary Redirect"},
		{"opaStall", opaStall, "did not answer within 500ms"},
		{"verdict with extra members", opaAnswer(200, `{"result":{"decision":"deny","rule":"svc.policy/frozen","reason":"frozen","Decisions":"allow","why":{"Decision":"allow"}}}`), ""},
		{"Result member", opaAnswer(200, `{"Result":{"DECISION":"allow","rule":"r","reason":"x"}}`), `"Result" spells "result" another way`},
		{"RESULT beside result", opaAnswer(200, `{"RESULT":{"decision":"allow","rule":"r","reason":"x"},"result":`+verdict+`}`), `"RESULT" spells "result" another way`},
		{"duplicate result", opaAnswer(200, `{"result":`+verdict+`,"result":{"decision":"allow","rule":"r","reason":"x"}}`), `"result" appears twice`},
		{"folded decision after decision", opaAnswer(200, `{"result":{"decision":"deny","deciſion":"allow","rule":"r","reason":"x"}}`), `"deciſion" spells "decision" another way`},
		{"upper-case verdict", opaAnswer(200, `{"result":{"DECISION":"allow","RULE":"r","REASON":"x"}}`), `spells "decision" another way`},
		{"Rule beside rule", opaAnswer(200, `{"result":{"decision":"deny","rule":"svc.policy/frozen","Rule":"r","reason":"frozen"}}`), `"Rule" spells "rule" another way`},
		{"duplicate decision", opaAnswer(200, `{"result":{"decision":"deny","decision":"allow","rule":"r","reason":"x"}}`), `"decision" appears twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ev := fakeOPAServer(t, tt.handler)
			start := time.Now()
			got, err := ev.Evaluate(t.Context(), opaInput(nil))
			assert.Less(t, time.Since(start), 4*time.Second, "a stalled server: bounded by the 500ms timeout")
			if tt.want == "" {
				require.NoError(t, err)
				assert.Equal(t, engine.Verdict{Decision: engine.Deny, Rule: RuleFrozen, Reason: "frozen"}, got)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.Equal(t, engine.Verdict{}, got)
		})
	}
}

// TestRESTEvaluatorRequest checks what svc sends: a POST of {"input": ...}
// to the decision document, strict built-in errors, under a path prefix.
func TestRESTEvaluatorRequest(t *testing.T) {
	type seen struct {
		method, path, query, ctype string
		body                       map[string]json.RawMessage
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var s seen
		s.method, s.path, s.query, s.ctype = r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Content-Type")
		_ = json.NewDecoder(r.Body).Decode(&s.body)
		assert.Empty(t, r.Header.Values("Idempotency-Key"), "the idempotency marker is not sent")
		got <- s
		_, _ = io.WriteString(w, `{"result":{"decision":"allow","rule":"r","reason":"x"}}`)
	}))
	defer srv.Close()
	ev, err := NewRESTEvaluator(srv.URL+"/opa/", time.Second)
	require.NoError(t, err)
	defer ev.Close()

	input := opaInput(nil)
	_, err = ev.Evaluate(t.Context(), input)
	require.NoError(t, err)
	s := <-got
	assert.Equal(t, "POST", s.method)
	assert.Equal(t, "/opa/v1/data/svc/policy/decision", s.path)
	assert.Equal(t, "strict-builtin-errors=true", s.query)
	assert.Equal(t, "application/json", s.ctype)
	assert.JSONEq(t, string(input), string(s.body["input"]))
	assert.Len(t, s.body, 1)
}

// TestRESTEvaluatorReusesConnections: decisions share a keep-alive
// connection, and one the server drops without answering is retried on a
// fresh connection rather than denied.
func TestRESTEvaluatorReusesConnections(t *testing.T) {
	const verdict = `{"result":{"decision":"allow","rule":"r","reason":"x"}}`
	var mu sync.Mutex
	served := map[string]int{} // requests answered per client connection
	drop := 20                 // the request on which the server hangs up
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		served[r.RemoteAddr]++
		n := 0
		for _, c := range served {
			n += c
		}
		mu.Unlock()
		if n == drop {
			conn, _, err := http.NewResponseController(w).Hijack()
			if assert.NoError(t, err) {
				_ = conn.Close()
			}
			return
		}
		_, _ = io.WriteString(w, verdict)
	}))
	defer srv.Close()
	ev, err := NewRESTEvaluator(srv.URL, time.Second)
	require.NoError(t, err)
	defer ev.Close()
	for i := range 30 {
		_, err := ev.Evaluate(t.Context(), opaInput(nil))
		require.NoError(t, err, "decision %d", i+1)
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Len(t, served, 2, "one connection until the server dropped it, then one more")
}

func TestRESTEvaluatorCallerCancel(t *testing.T) {
	ev := fakeOPAServer(t, opaStall)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err := ev.Evaluate(ctx, opaInput(nil))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "canceled")
}

func TestRESTEvaluatorUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	ev, err := NewRESTEvaluator(url, time.Second)
	require.NoError(t, err)
	defer ev.Close()

	_, err = ev.Evaluate(t.Context(), opaInput(nil))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "connection refused")
	err = ev.Check(t.Context())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "connection refused")
}

// TestRESTEvaluatorExternalServer: a real server that goes away denies, and
// decisions resume when it is back; a server without the pack fails Check.
func TestRESTEvaluatorExternalServer(t *testing.T) {
	url, cmd := startExternalOPA(t, bundledPack(t))
	ev, err := NewRESTEvaluator(url, time.Second)
	require.NoError(t, err)
	defer ev.Close()
	require.NoError(t, ev.Check(t.Context()))

	require.NoError(t, killProcessGroup(cmd.Process.Pid))
	_ = cmd.Wait()
	_, err = ev.Evaluate(t.Context(), opaInput(nil))
	require.Error(t, err, "an absent server never yields a verdict")

	empty, _ := startExternalOPA(t, t.TempDir())
	bare, err := NewRESTEvaluator(empty, time.Second)
	require.NoError(t, err)
	defer bare.Close()
	err = bare.Check(t.Context())
	require.ErrorIs(t, err, errPolicyUndefined)
	assert.Contains(t, err.Error(), "is package svc.policy loaded")
}

func TestNewRESTEvaluatorRejects(t *testing.T) {
	for _, raw := range []string{"", "opa:8181", "ftp://opa", "http://", "unix:///tmp/opa.sock", "http://a b"} {
		_, err := NewRESTEvaluator(raw, time.Second)
		assert.Error(t, err, raw)
	}
}

func TestOPAServerOutput(t *testing.T) {
	var logs bytes.Buffer
	o := &opaServerOutput{log: zerolog.New(&logs), tail: 16}
	for _, w := range []string{"first li", "ne\nsecond\n\nthird ", "part"} {
		n, err := o.Write([]byte(w))
		require.NoError(t, err)
		assert.Equal(t, len(w), n)
	}
	assert.Equal(t, "cond third part", o.snippet(), "the latest 16 bytes, on one line")
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	require.Len(t, lines, 2, "complete non-empty lines are logged: %s", logs.String())
	assert.Contains(t, lines[0], `"opa":"first line"`)
	assert.Contains(t, lines[1], `"opa":"second"`)

	long := &opaServerOutput{log: zerolog.New(&logs), tail: 16}
	logs.Reset()
	_, _ = long.Write(bytes.Repeat([]byte("x"), 3*opaMaxSnippet))
	assert.Equal(t, 1, strings.Count(logs.String(), "\n"), "an endless line is logged in pieces, not buffered")
	assert.Equal(t, "no output", (&opaServerOutput{}).snippet())
}

func TestOPAServerOutputLevels(t *testing.T) {
	tests := []struct {
		line, level string
	}{
		{`{"level":"info","msg":"Initializing server."}`, "info"},
		{`{"level":"info","msg":"Processed file watch event.","err":null}`, "info"},
		{`{"level":"info","msg":"Processed file watch event.","err":"rego_parse_error"}`, "warn"},
		{`{"level":"warning","msg":"OPA running with uid or gid 0."}`, "warn"},
		{`{"level":"error","msg":"boom"}`, "error"},
		{`error: load error: rego_parse_error`, "warn"},
		{`{"Level":"info","msg":"level spelt another way"}`, "warn"},
		{`{"level":"info","msg":"Processed file watch event.","err":null,"ERR":"rego_parse_error"}`, "warn"},
		{`{"level":"error","level":"info","msg":"duplicate level"}`, "warn"},
		{`{"level":"info","msg":"Server initialized.","Message":"x"}`, "info"},
	}
	for _, tt := range tests {
		var logs bytes.Buffer
		o := &opaServerOutput{log: zerolog.New(&logs), tail: opaOutputTail}
		_, _ = o.Write([]byte(tt.line + "\n"))
		var rec map[string]any
		require.NoError(t, json.Unmarshal(logs.Bytes(), &rec), logs.String())
		assert.Equal(t, tt.level, rec["level"], tt.line)
	}
}

// TestOPAServerOutputStructured: opa's JSON records are re-emitted as a
// nested object whose members a log pipeline reads as fields, not as a
// string holding JSON; other lines stay strings.
func TestOPAServerOutputStructured(t *testing.T) {
	var logs bytes.Buffer
	o := &opaServerOutput{log: zerolog.New(&logs), tail: opaOutputTail}
	_, _ = o.Write([]byte(`{"level":"info","msg":"Processed file watch event.","err":"rego_parse_error","time":"x"}` + "\n" +
		"error: not json\n" + `{"level":"info","msg":"cut` + "\n"))
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	require.Len(t, lines, 3)
	var rec struct {
		Level string         `json:"level"`
		OPA   map[string]any `json:"opa"`
	}
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &rec), lines[0])
	assert.Equal(t, "warn", rec.Level)
	assert.Equal(t, map[string]any{"level": "info", "msg": "Processed file watch event.", "err": "rego_parse_error", "time": "x"}, rec.OPA)
	for _, l := range lines[1:] {
		var plain map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &plain), l)
		assert.IsType(t, "", plain["opa"], l)
	}
}
