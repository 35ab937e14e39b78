package cmd_test

import (
	"encoding/json"
	"maps"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// msTimestamp is an RFC 3339 UTC timestamp with millisecond precision.
var msTimestamp = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

// pinRecords counts what the kill switch's changes left: kill_switch
// flipped/cleared frames, freeze.flipped webhooks, freeze audit lines.
type pinRecords struct{ siem, hooks, audit int }

// freezeRecords counts the records of freeze changes so far, once the
// engine has stopped (its export queues drained).
func freezeRecords(t *testing.T, col *udpCollector, sink *webhookSink, auditLog string) pinRecords {
	t.Helper()
	var n pinRecords
	for _, ev := range syslogBodies(col, "kill_switch") {
		if ev["action"] != "queried" {
			n.siem++
		}
	}
	sink.mu.Lock()
	for _, ev := range sink.events {
		if ev["event"] == "freeze.flipped" {
			n.hooks++
		}
	}
	sink.mu.Unlock()
	for _, rec := range auditLines(t, auditLog) {
		if rec["event"] == "freeze" {
			n.audit++
		}
	}
	return n
}

// syslogBodies returns the JSON bodies of the frames of msgid received.
func syslogBodies(col *udpCollector, msgid string) []map[string]any {
	col.mu.Lock()
	defer col.mu.Unlock()
	var out []map[string]any
	for _, f := range col.frames {
		m := frameRE.FindStringSubmatch(f)
		var body map[string]any
		if m != nil && m[5] == msgid && json.Unmarshal([]byte(strings.TrimPrefix(m[6], "\ufeff")), &body) == nil {
			out = append(out, body)
		}
	}
	return out
}

// stopDrained stops p and waits for its lifecycle "stop" frame, the n-th
// of the test: everything it published before is then sent.
func stopDrained(t *testing.T, p *engineProc, col *udpCollector, n int) {
	t.Helper()
	p.stop(t)
	require.Eventually(t, func() bool {
		var stops int
		for _, ev := range syslogBodies(col, "lifecycle") {
			if ev["action"] == "stop" {
				stops++
			}
		}
		return stops >= n
	}, 5*time.Second, 20*time.Millisecond, "lifecycle stop %d", n)
}

// TestFreezePinAcrossRestartsIsRecorded: setting SVC_FREEZE on a database
// that was not frozen, and unsetting it again, each change the state the
// engine runs with at start-up: each is recorded like an API change, by
// config:SVC_FREEZE; a restart that changes nothing records nothing.
func TestFreezePinAcrossRestartsIsRecorded(t *testing.T) {
	p, env, col, sink := exportEngine(t, map[string]string{"SVC_FREEZE": "true"})
	_, ks := col.waitFrame(t, "kill_switch", `"flipped"`)
	assert.Equal(t, "config:SVC_FREEZE", ks["by"])
	assert.Contains(t, ks["reason"], "SVC_FREEZE=true at start-up")
	hook := sink.waitWhere(t, "freeze.flipped", func(ev map[string]any) bool { return ev["frozen"] == true })
	assert.Equal(t, "config:SVC_FREEZE", hook["by"])
	q := p.call(t, "GET", "/v1/freeze", nil)
	assert.Equal(t, true, q.Body["frozen"])
	assert.Equal(t, true, q.Body["pinned"])
	assert.Equal(t, "config:SVC_FREEZE", q.str("by"))
	assert.Regexp(t, msTimestamp, q.str("updated_ts"))
	stopDrained(t, p, col, 1)
	assert.Equal(t, pinRecords{1, 1, 1}, freezeRecords(t, col, sink, env["SVC_AUDIT_LOG"]))

	again := startEngine(t, env)
	assert.Equal(t, q.str("updated_ts"), again.call(t, "GET", "/v1/freeze", nil).str("updated_ts"),
		"the pin's state is kept, not made anew")
	stopDrained(t, again, col, 2)
	assert.Equal(t, pinRecords{1, 1, 1}, freezeRecords(t, col, sink, env["SVC_AUDIT_LOG"]), "still pinned: nothing changed")

	unpinned := maps.Clone(env)
	delete(unpinned, "SVC_FREEZE")
	cleared := startEngine(t, unpinned)
	_, ks = col.waitFrame(t, "kill_switch", `"cleared"`)
	assert.Equal(t, "config:SVC_FREEZE", ks["by"])
	assert.Contains(t, ks["reason"], "SVC_FREEZE no longer set at start-up")
	sink.waitWhere(t, "freeze.flipped", func(ev map[string]any) bool { return ev["frozen"] == false })
	q = cleared.call(t, "GET", "/v1/freeze", nil)
	assert.Equal(t, false, q.Body["frozen"])
	assert.Equal(t, "config:SVC_FREEZE", q.str("by"))
	assert.Equal(t, "allow", cleared.decide(t, envelope(map[string]any{"action.verb": "delete"})).str("decision"))
	stopDrained(t, cleared, col, 3)
	assert.Equal(t, pinRecords{2, 2, 2}, freezeRecords(t, col, sink, env["SVC_AUDIT_LOG"]))

	stopDrained(t, startEngine(t, unpinned), col, 4)
	assert.Equal(t, pinRecords{2, 2, 2}, freezeRecords(t, col, sink, env["SVC_AUDIT_LOG"]), "still unpinned: nothing changed")
	for _, rec := range auditLines(t, env["SVC_AUDIT_LOG"]) {
		if rec["event"] == "freeze" {
			assert.Equal(t, "config:SVC_FREEZE", rec["by"])
		}
	}
}

// freezeCLI runs `svc args...` against the engine at url with token.
func freezeCLI(t *testing.T, url, token string, args ...string) string {
	t.Helper()
	r := runSvc(t, map[string]string{"SVC_CORE_URL": url, "SVC_CORE_TOKEN": token}, nil, args...)
	require.Zero(t, r.code, r.output())
	return r.output()
}

// TestFreezeUpdatedTSMilliseconds: updated_ts is RFC 3339 UTC with
// millisecond precision before and after a restart, null (the CLI: never)
// while the state never changed.
func TestFreezeUpdatedTSMilliseconds(t *testing.T) {
	p, env, _, _ := exportEngine(t, nil)
	q := p.call(t, "GET", "/v1/freeze", nil)
	require.Contains(t, q.Body, "updated_ts")
	assert.Nil(t, q.Body["updated_ts"], "never changed")
	assert.Contains(t, freezeCLI(t, p.URL, p.token, "freeze", "status"), "since: never\n")

	set := p.call(t, "POST", "/v1/freeze", map[string]any{"frozen": true, "reason": "incident 42"})
	require.Equal(t, 200, set.Status, "%v", set.Body)
	ts := set.str("updated_ts")
	assert.Regexp(t, msTimestamp, ts)
	assert.Equal(t, ts, p.call(t, "GET", "/v1/freeze", nil).str("updated_ts"))
	assert.Contains(t, freezeCLI(t, p.URL, p.token, "freeze", "status"), "since: "+ts+"\n")
	var view map[string]any
	require.NoError(t, json.Unmarshal([]byte(freezeCLI(t, p.URL, p.token, "freeze", "status", "-o", "json")), &view))
	assert.Equal(t, ts, view["updated_ts"])
	p.stop(t)

	again := startEngine(t, env)
	assert.Equal(t, ts, again.call(t, "GET", "/v1/freeze", nil).str("updated_ts"), "the same after a restart")
}

// TestFreezeBodyErrors: each refused body of POST /v1/freeze answers as
// docs/api.md says, and changes nothing.
func TestFreezeBodyErrors(t *testing.T) {
	p, env, _, _ := exportEngine(t, nil)
	const usage = "body must be a JSON object {frozen, reason}"
	const required = "is required and must be a boolean"
	for _, tc := range []struct {
		name, body         string
		status             int
		err, field, reason string
	}{
		{"frozen a string", `{"frozen":"yes"}`, 400, "invalid_json", "frozen", usage},
		{"reason a number", `{"frozen":true,"reason":5}`, 400, "invalid_json", "reason", usage},
		{"not an object", `[true]`, 400, "invalid_json", "", usage},
		{"trailing data", `{"frozen":true} {}`, 400, "invalid_json", "", usage},
		{"frozen missing", `{}`, 400, "invalid_request", "frozen", required},
		{"frozen null", `{"frozen":null,"reason":"x"}`, 400, "invalid_request", "frozen", required},
		{"too large", `{"frozen":true,"reason":"` + strings.Repeat("x", 300<<10) + `"}`, 413, "payload_too_large", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := p.call(t, "POST", "/v1/freeze", tc.body)
			assert.Equal(t, tc.status, r.Status)
			assert.Equal(t, tc.err, r.str("error"))
			assert.Equal(t, tc.field, r.str("field"))
			assert.Equal(t, tc.reason, r.str("reason"))
		})
	}
	assert.Equal(t, false, p.call(t, "GET", "/v1/freeze", nil).Body["frozen"])
	p.stop(t)
	for _, rec := range auditLines(t, env["SVC_AUDIT_LOG"]) {
		assert.NotEqual(t, "freeze", rec["event"], "a refused body changes nothing")
	}
}
