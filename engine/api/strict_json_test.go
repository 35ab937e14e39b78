package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/envelope"
)

// ambiguousCase is a body that JSON readers disagree on or a strict reader
// refuses, with the member the refusal names ("" for the body as a whole).
type ambiguousCase struct {
	name, body, field string
}

// resolveAmbiguous are the reproduced lax readings of a resolve body.
var resolveAmbiguous = []ambiguousCase{
	{"duplicate, last wins", `{"decision":"reject","decision":"approve"}`, "decision"},
	{"duplicate through an escape", `{"decision":"reject","d\u0065cision":"approve"}`, "decision"},
	{"case variant", `{"decision":"reject","DECISION":"approve"}`, "DECISION"},
	{"case variant alone", `{"Decision":"approve"}`, "Decision"},
	{"an object where a string goes", `{"decision":"approve","reason":{"a":1}}`, "reason"},
	{"matches only after Unicode folding", `{"deciſion":"approve"}`, "deciſion"},
	{"surrounding space", `{" decision":"approve"}`, " decision"},
	{"unknown field", `{"decision":"approve","approved":true}`, "approved"},
	{"dotted name", `{"decision":"approve","principal.type":"human"}`, "principal.type"},
	{"second object", `{"decision":"reject"}{"decision":"approve"}`, ""},
	{"trailing garbage", `{"decision":"reject"} garbage`, ""},
	{"duplicate in principal", `{"decision":"approve","principal":{"type":"agent","id":"a","type":"human"}}`, "principal.type"},
	{"case variant in principal", `{"decision":"approve","principal":{"type":"agent","id":"a","TYPE":"human"}}`, "principal.TYPE"},
	{"unknown field in principal", `{"decision":"approve","principal":{"type":"human","id":"a","admin":true}}`, "principal.admin"},
	{"not an object", `["approve"]`, ""},
	{"null", `null`, ""},
	{"empty", ``, ""},
	{"malformed", `{"decision":`, ""},
	{"wrong type", `{"decision":true}`, "decision"},
}

// freezeAmbiguous are the reproduced lax readings of a freeze body.
var freezeAmbiguous = []ambiguousCase{
	{"case variant freezes", `{"frozen":false,"FROZEN":true}`, "FROZEN"},
	{"duplicate, last wins", `{"frozen":true,"frozen":false}`, "frozen"},
	{"duplicate through an escape", `{"frozen":true,"fr\u006fzen":false}`, "frozen"},
	{"duplicate reason", `{"frozen":true,"reason":"a","reason":"b"}`, "reason"},
	{"unknown field", `{"frozen":true,"pinned":true}`, "pinned"},
	{"second object", `{"frozen":false}{"frozen":true}`, ""},
	{"trailing garbage", `{"frozen":true} garbage`, ""},
	{"not an object", `true`, ""},
	{"wrong type", `{"frozen":"true"}`, "frozen"},
}

func TestDecodeStrict(t *testing.T) {
	fields := []string{"decision", "reason", "principal", "principal.type", "principal.id"}
	tests := []struct {
		name, body string
		want       resolveBody
	}{
		{"documented body", `{"decision": "approve", "reason": "cleanup ticket OPS-12"}`,
			resolveBody{Decision: ptr("approve"), Reason: ptr("cleanup ticket OPS-12")}},
		{"with principal", `{"decision":"reject","principal":{"type":"human","id":"carol"}}`,
			resolveBody{Decision: ptr("reject"), Principal: &engine.Principal{Type: "human", ID: "carol"}}},
		{"escaped name, once", `{"d\u0065cision":"approve"}`, resolveBody{Decision: ptr("approve")}},
		{"whitespace around", " \n\t{\"decision\":\"approve\"}\r\n ", resolveBody{Decision: ptr("approve")}},
		{"null members", `{"decision":null,"reason":null,"principal":null}`, resolveBody{}},
		{"empty object", `{}`, resolveBody{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got resolveBody
			require.NoError(t, decodeStrict([]byte(tt.body), &got, "usage", fields...))
			assert.Equal(t, tt.want, got)
		})
	}
	for _, tt := range resolveAmbiguous {
		t.Run(tt.name, func(t *testing.T) {
			var got resolveBody
			err := decodeStrict([]byte(tt.body), &got, "usage", fields...)
			var e *engine.Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, engine.EINVALID, e.Code)
			assert.Equal(t, "invalid_json", e.Name)
			assert.Equal(t, tt.field, fieldOf(e))
		})
	}
}

func TestDecodeStrictReasons(t *testing.T) {
	tests := []struct{ name, body, reason string }{
		{"duplicate", `{"frozen":true,"frozen":false}`, "duplicate key (keys must be unique)"},
		{"unknown", `{"FROZEN":true}`, "field names are spelled exactly as documented: frozen, reason"},
		{"object where a string goes: a type error", `{"reason":{"x":1}}`, "usage"},
		{"not an object", `{} []`, "usage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got freezeBody
			err := decodeStrict([]byte(tt.body), &got, "usage", "frozen", "reason")
			var e *engine.Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, tt.reason, e.Message)
		})
	}
}

func TestResolveBodyIsStrict(t *testing.T) {
	for _, tt := range resolveAmbiguous {
		t.Run(tt.name, func(t *testing.T) {
			res := &recordingResolver{}
			code, body := post(t, newStrictServer(t, res), "/v1/holds/h1/resolve", tt.body)
			assert.Equal(t, http.StatusBadRequest, code)
			assert.Equal(t, "invalid_json", body["error"])
			assert.Equal(t, tt.field, fieldOf(body))
			assert.NotEmpty(t, body["reason"])
			assert.Nil(t, res.got, "the resolver must not see an ambiguous body")
		})
	}
}

func TestResolveValidBodies(t *testing.T) {
	tests := []struct {
		name, body string
		want       engine.ResolveRequest
	}{
		{"documented", `{"decision": "approve", "reason": "cleanup ticket OPS-12"}`,
			engine.ResolveRequest{Decision: "approve", Reason: "cleanup ticket OPS-12"}},
		{"reject without reason", `{"decision":"reject"}`, engine.ResolveRequest{Decision: "reject"}},
		{"asserted principal", `{"decision":"approve","principal":{"type":"human","id":"carol"}}`,
			engine.ResolveRequest{Decision: "approve", Asserted: &engine.Principal{Type: "human", ID: "carol"}}},
		{"no decision reaches the resolver", `{}`, engine.ResolveRequest{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := &recordingResolver{}
			code, body := post(t, newStrictServer(t, res), "/v1/holds/h1/resolve", tt.body)
			require.Equal(t, http.StatusOK, code, "%v", body)
			require.NotNil(t, res.got)
			assert.Equal(t, "h1", res.got.HoldID)
			assert.Equal(t, tt.want.Decision, res.got.Decision)
			assert.Equal(t, tt.want.Reason, res.got.Reason)
			assert.Equal(t, tt.want.Asserted, res.got.Asserted)
		})
	}
}

func TestFreezeBodyIsStrict(t *testing.T) {
	for _, tt := range freezeAmbiguous {
		t.Run(tt.name, func(t *testing.T) {
			srv := newStrictServer(t, &recordingResolver{})
			code, body := post(t, srv, "/v1/freeze", tt.body)
			assert.Equal(t, http.StatusBadRequest, code)
			assert.Equal(t, "invalid_json", body["error"])
			assert.Equal(t, tt.field, fieldOf(body))
			assert.False(t, srv.kill.Query().Frozen, "an ambiguous body must change nothing")
		})
	}
}

func TestFreezeValidBodies(t *testing.T) {
	tests := []struct {
		name, body string
		frozen     bool
		reason     string
	}{
		{"freeze with reason", `{"frozen": true, "reason": "incident 42"}`, true, "incident 42"},
		{"freeze without reason", `{"frozen":true}`, true, ""},
		{"clear", `{"frozen":false,"reason":"resolved"}`, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newStrictServer(t, &recordingResolver{})
			code, body := post(t, srv, "/v1/freeze", tt.body)
			require.Equal(t, http.StatusOK, code, "%v", body)
			st := srv.kill.Query()
			assert.Equal(t, tt.frozen, st.Frozen)
			assert.Equal(t, tt.reason, st.Reason)
		})
	}
	code, body := post(t, newStrictServer(t, &recordingResolver{}), "/v1/freeze", `{"reason":"x"}`)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Equal(t, "invalid_request", body["error"], "frozen is still required")
	assert.Equal(t, "frozen", body["field"])
}

// strictServer is a Server over a recording resolver and an in-memory kill
// switch, answering SVC_AUTH_TOKEN "op".
type strictServer struct {
	handler http.Handler
	kill    *engine.KillSwitch
}

func newStrictServer(t *testing.T, res engine.Resolver) strictServer {
	t.Helper()
	e, err := engine.New(engine.Config{}, engine.Deps{Evaluator: struct{ engine.Evaluator }{}, Budgets: struct{ engine.Budgets }{},
		Holds: struct{ engine.Holds }{}, Recorder: nopJournal{}, Logger: zerolog.Nop()})
	require.NoError(t, err)
	kill, err := engine.NewKillSwitch(context.Background(), e, &memFreeze{}, false)
	require.NoError(t, err)
	srv := NewServer(ServerConfig{AuthToken: "op", MaxBodyBytes: 1 << 16},
		ServerDeps{Engine: e, Resolver: res, KillSwitch: kill, Logger: zerolog.Nop()})
	return strictServer{handler: srv.Handler(), kill: kill}
}

// post sends body with the operator token and decodes the JSON answer.
func post(t *testing.T, srv strictServer, path, body string) (int, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer op")
	rec := httptest.NewRecorder()
	srv.handler.ServeHTTP(rec, req)
	var out map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out), rec.Body.String())
	return rec.Code, out
}

// fieldOf returns the "field" of an *Error or of an answer body, "" if none.
func fieldOf(v any) string {
	switch x := v.(type) {
	case *engine.Error:
		f, _ := x.Fields["field"].(string)
		return f
	case map[string]any:
		f, _ := x["field"].(string)
		return f
	}
	return ""
}

func ptr(s string) *string { return &s }

// recordingResolver resolves every hold, keeping the last request.
type recordingResolver struct{ got *engine.ResolveRequest }

func (r *recordingResolver) Resolve(_ context.Context, req engine.ResolveRequest) (engine.Hold, error) {
	r.got = &req
	return engine.Hold{ID: req.HoldID, Status: engine.HoldApproved}, nil
}

func (r *recordingResolver) Identify(string) (engine.Principal, bool, error) {
	return engine.Principal{}, false, nil
}

// nopJournal accepts every record.
type nopJournal struct{ engine.Journal }

func (nopJournal) Record(context.Context, string, any) error { return nil }

// memFreeze keeps the freeze state in memory.
type memFreeze struct{ st engine.FreezeState }

func (m *memFreeze) LoadFreeze(context.Context) (engine.FreezeState, error) { return m.st, nil }

func (m *memFreeze) SaveFreeze(_ context.Context, st engine.FreezeState) error {
	m.st = st
	return nil
}

// TestDecodeStrictManyMembers checks duplicates among many members of a
// strictly decoded body (more than envelope.KeySet compares one by one).
func TestDecodeStrictManyMembers(t *testing.T) {
	fields := make([]string, 0, 48)
	var body strings.Builder
	body.WriteString("{")
	for i := range cap(fields) {
		fields = append(fields, fmt.Sprintf("f%d", i))
		fmt.Fprintf(&body, `"f%d":%d,`, i, i)
	}
	body.WriteString(`"f5":5}`)
	var got map[string]int
	err := decodeStrict([]byte(body.String()), &got, "usage", fields...)
	var e *engine.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, envelope.ReasonDuplicateKey, e.Message)
	assert.Equal(t, "f5", fieldOf(e))
}

// TestPortalNullAnswerIsNoObject checks that null, which the verdict
// readers take for an object without members, is a portal fault.
func TestPortalNullAnswerIsNoObject(t *testing.T) {
	var values [len(gateMembers)]json.RawMessage
	assert.ErrorContains(t, answerMembers([]byte("null"), values[:]), "portal answer is not a JSON object")
}

// TestBodiesRefuseInvalidText checks that every body svc parses refuses
// invalid UTF-8 and escaped lone surrogates (RFC 7493), naming the offset,
// rather than reading them as U+FFFD: one approval would otherwise cover
// bodies that differ there.
func TestBodiesRefuseInvalidText(t *testing.T) {
	minimal, err := os.ReadFile(filepath.Join("..", "envelope", "testdata", "envelopes", "minimal.json"))
	require.NoError(t, err)
	withParams := func(p string) string {
		return strings.Replace(string(minimal), `"approval":`, `"params": `+p+`, "approval":`, 1)
	}
	cases := []struct {
		name, path, body, bad string // bad: the offending bytes, found in body for the offset
	}{
		{"decide, invalid byte", "/v1/decide", withParams("{\"to\":\"acct-\xff\"}"), "\xff"},
		{"decide, overlong form", "/v1/decide", withParams("{\"to\":\"acct-\xc0\xaf\"}"), "\xc0"},
		{"decide, lone high surrogate", "/v1/decide", withParams(`{"to":"acct-\ud800"}`), `\ud800`},
		{"decide, lone low surrogate in a key", "/v1/decide", withParams(`{"\udfff":1}`), `\udfff`},
		{"resolve, invalid byte", "/v1/holds/h1/resolve", "{\"decision\":\"approve\",\"reason\":\"ok\xfe\"}", "\xfe"},
		{"resolve, lone surrogate", "/v1/holds/h1/resolve", `{"decision":"approve","reason":"\udbff"}`, `\udbff`},
		{"freeze, invalid byte", "/v1/freeze", "{\"frozen\":true,\"reason\":\"\xed\xa0\x80\"}", "\xed"},
		{"freeze, lone surrogate", "/v1/freeze", `{"frozen":true,"reason":"\ud800\u0041"}`, `\ud800`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := &recordingResolver{}
			srv := newStrictServer(t, res)
			code, body := post(t, srv, c.path, c.body)
			require.Equal(t, http.StatusBadRequest, code, "%v", body)
			assert.Equal(t, "invalid_json", body["error"])
			assert.EqualValues(t, strings.Index(c.body, c.bad), body["offset"])
			assert.Contains(t, body["reason"], "RFC 7493")
			assert.Nil(t, res.got, "the resolver must not see the body")
			assert.False(t, srv.kill.Query().Frozen, "the body must change nothing")
			if c.path == "/v1/decide" {
				assert.Equal(t, engine.Deny, body["decision"])
			}
		})
	}
}
