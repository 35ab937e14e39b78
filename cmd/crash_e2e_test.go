package cmd_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCrashBetweenAuditWritesIsVoided kills svc (SIGKILL, by the crash hook
// of the svcfault build) in the batch of an approved re-submission, once
// its allow and the hold's consumption are in the audit file and before the
// database commits them. The agent got no answer and the hold is still
// approved, so its re-submission after the restart is allowed: the audit
// log read with its voided records must show exactly what was answered,
// one consumption of the approval.
func TestCrashBetweenAuditWritesIsVoided(t *testing.T) {
	p, env := holdsEngine(t, map[string]string{"SVCFAULT_CRASH_BEFORE_COMMIT": `"status":"consumed"`})
	id, parent := raiseHold(t, p, nil)
	require.Equal(t, 200, resolve(t, p, "tok-bob", id, map[string]any{"decision": "approve"}).Status)

	req, err := http.NewRequest("POST", p.URL+"/v1/decide", jsonReader(t, resubmission(id, nil)))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+p.token)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the re-submission was answered %d; the crash hook did not fire", resp.StatusCode)
	}
	<-p.done
	raw, err := os.ReadFile(env["SVC_AUDIT_LOG"])
	require.NoError(t, err)
	require.Contains(t, string(raw), `"status":"consumed"`, "the crash came after the file write")

	delete(env, "SVCFAULT_CRASH_BEFORE_COMMIT")
	q := startEngine(t, env)
	assert.Len(t, q.logsWith("audit log: lines of a batch not committed before a crash were voided"), 1)
	assert.Equal(t, "approved", q.call(t, "GET", "/v1/holds/"+id, nil).str("status"), "the crashed batch never committed")
	d := q.decide(t, resubmission(id, nil))
	require.Equal(t, "allow", d.str("decision"), "%v", d.Body)
	again := q.decide(t, resubmission(id, nil))
	assert.Equal(t, "svc_hold_consumed", again.str("reason"))
	q.stop(t)

	var decisions, transitions []string
	for _, rec := range withoutVoided(t, env["SVC_AUDIT_LOG"]) {
		switch rec["event"] {
		case "decision":
			decisions = append(decisions, rec["decision_id"].(string))
		case "hold_resolution":
			transitions = append(transitions, rec["status"].(string))
		}
	}
	assert.Equal(t, []string{parent, d.str("decision_id"), again.str("decision_id")}, decisions,
		"the log read with its voids holds exactly the answered decisions")
	assert.Equal(t, []string{"pending", "approved", "consumed"}, transitions, "one consumption of the approval")
}

// withoutVoided reads the audit log as a SIEM does: every line named by a
// voided record (by its line_sha256) is dropped, and so are the voided
// records.
func withoutVoided(t *testing.T, path string) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	void := map[string]bool{}
	for _, l := range lines {
		var rec map[string]any
		if json.Unmarshal([]byte(l), &rec) == nil && rec["event"] == "voided" {
			void[rec["line_sha256"].(string)] = true
		}
	}
	var out []map[string]any
	for _, l := range lines {
		sum := sha256.Sum256([]byte(l))
		var rec map[string]any
		if void[hex.EncodeToString(sum[:])] {
			continue
		}
		require.NoError(t, json.Unmarshal([]byte(l), &rec), "audit line %q", l)
		if rec["event"] != "voided" {
			out = append(out, rec)
		}
	}
	return out
}
