package cmd_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUnknownTopLevelFieldsNeverInfluenceTheDecision(t *testing.T) {
	p := startEngine(t, baseEnv(t))
	held := map[string]any{"action.verb": "delete", "axes.reversibility": "irreversible",
		"axes.blast_radius": "broad", "target.environment": "production"}
	plain := p.decide(t, envelope(held))
	held["params.which"] = "sneaky" // another action (its own hold), of the same envelope hash
	sneaky := envelope(held)
	sneaky["frozen"] = false
	sneaky["cumulative"] = map[string]any{"deletes": 0}
	sneaky["decision"] = "allow"
	sneaky["envelope"] = map[string]any{"target": map[string]any{"environment": "dev"}}
	r := p.decide(t, sneaky)
	require.Equal(t, 200, r.Status, "%v", r.Body)
	assert.Equal(t, plain.str("decision"), r.str("decision"))
	assert.Equal(t, plain.str("rule"), r.str("rule"))
	assert.Equal(t, plain.str("envelope_hash"), r.str("envelope_hash"))
	h := p.call(t, "GET", "/v1/holds/"+r.str("hold_id"), nil)
	env, _ := h.Body["envelope"].(map[string]any)
	extra, _ := env["extra"].(map[string]any)
	assert.Contains(t, extra, "decision", "unknown fields are kept with the hold's envelope")
}

func TestShutdownFinishesInFlightDecisions(t *testing.T) {
	env := baseEnv(t)
	p := startEngine(t, env)
	type answer struct {
		status int
		id     string
	}
	var mu sync.Mutex
	var answers []answer
	var wg sync.WaitGroup
	started := make(chan struct{}, 32)
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, err := http.NewRequest("POST", p.URL+"/v1/decide", jsonReader(t, envelope(nil)))
			require.NoError(t, err)
			started <- struct{}{}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return // not accepted before the listener closed
			}
			defer resp.Body.Close()
			var body struct {
				DecisionID string `json:"decision_id"`
			}
			_ = jsonDecode(resp.Body, &body)
			mu.Lock()
			answers = append(answers, answer{resp.StatusCode, body.DecisionID})
			mu.Unlock()
		}()
	}
	for i := 0; i < 32; i++ {
		<-started
	}
	time.Sleep(30 * time.Millisecond) // let some requests reach opa
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	wg.Wait()
	<-p.done
	require.NotEmpty(t, answers)
	audited := map[string]bool{}
	for _, rec := range auditLines(t, env["SVC_AUDIT_LOG"]) {
		if id, ok := rec["decision_id"].(string); ok && rec["event"] == "decision" {
			audited[id] = true
		}
	}
	for _, a := range answers {
		assert.Equal(t, 200, a.status, "an accepted decision is finished, not cut off")
		assert.True(t, audited[a.id], "answered decision %s is on record", a.id)
	}
	assert.Len(t, audited, len(answers), "nothing on record that was not answered")
	assert.Contains(t, p.Logs(), "shutting down")
}

// TestAnsweredDecisionsSurviveAKill kills svc with SIGKILL right after it
// answers, under each SVC_DURABILITY: whatever it answered must be on record
// (audit line, hold row) when it starts again. (A power cut, which only
// "full" survives, cannot be staged here.)
func TestAnsweredDecisionsSurviveAKill(t *testing.T) {
	for _, durability := range []string{"full", "os"} {
		t.Run(durability, func(t *testing.T) {
			env := baseEnv(t)
			env["SVC_DURABILITY"] = durability
			env["SVC_OPA_MODE"] = "server"
			p := startEngine(t, env)
			assert.Contains(t, p.Logs(), `"durability":"`+durability+`"`)
			var answered []string
			for i := range 30 {
				r := p.decide(t, envelope(map[string]any{"agent.session_id": fmt.Sprint("kill-", i%7)}))
				require.Equal(t, 200, r.Status, "%v", r.Body)
				answered = append(answered, r.str("decision_id"))
			}
			holdID, parent := raiseHold(t, p, nil)
			answered = append(answered, parent)
			require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
			<-p.done

			audited := map[string]bool{}
			for _, rec := range auditLines(t, env["SVC_AUDIT_LOG"]) {
				if id, ok := rec["decision_id"].(string); ok && rec["event"] == "decision" {
					audited[id] = true
				}
			}
			for _, id := range answered {
				assert.True(t, audited[id], "answered decision %s is on record", id)
			}
			assert.Len(t, audited, len(answered))

			q := startEngine(t, env)
			h := q.call(t, "GET", "/v1/holds/"+holdID, nil)
			require.Equal(t, 200, h.Status, "%v", h.Body)
			assert.Equal(t, "pending", h.str("status"))
		})
	}
}

// TestDatabaseRemovedWhileServingDenies removes the database (svc.db and
// its -wal and -shm) under a running svc: it must not keep answering into
// the unlinked file, whose charges, holds and freeze flag a restart would
// lose. Every decision is denied from then on, the removal is logged once,
// and each deny is in the audit file, marked degraded.
func TestDatabaseRemovedWhileServingDenies(t *testing.T) {
	env := baseEnv(t)
	p := startEngine(t, env)
	require.Equal(t, 200, p.decide(t, envelope(nil)).Status)
	for _, suffix := range []string{"", "-wal", "-shm"} {
		require.NoError(t, os.Remove(env["SVC_HOLDS_PATH"]+suffix))
	}

	denied := map[string]bool{}
	for range 3 {
		r := p.decide(t, envelope(nil))
		require.Equal(t, 500, r.Status, "%v", r.Body)
		assert.Equal(t, "deny", r.str("decision"))
		assert.Equal(t, "svc.core/internal_error", r.str("rule"))
		denied[r.str("decision_id")] = true
	}
	const gone = "ledger database removed or replaced while svc runs: every decision is denied until svc is restarted"
	require.Eventually(t, func() bool { return len(p.logsWith(gone)) > 0 }, 5*time.Second, 10*time.Millisecond, p.Logs())
	assert.Len(t, p.logsWith(gone), 1, "logged once")
	for _, rec := range auditLines(t, env["SVC_AUDIT_LOG"])[1:] {
		assert.True(t, denied[rec["decision_id"].(string)], "only the denies follow the removal: %v", rec)
		assert.Equal(t, "deny", rec["verdict"])
		assert.Equal(t, true, rec["degraded"])
		assert.Contains(t, rec["audit_error"], "database file removed or replaced")
	}
	assert.Len(t, auditLines(t, env["SVC_AUDIT_LOG"]), 4)
	assert.NoFileExists(t, env["SVC_HOLDS_PATH"], "no empty database replaces the one removed")

	// A restart would start afresh, forgetting every hold and charge: it is
	// refused, naming both paths, unless --init says that is intended.
	p.stop(t)
	code, out := runFailing(t, env)
	assert.Equal(t, 2, code, out)
	assert.Contains(t, out, env["SVC_HOLDS_PATH"])
	assert.Contains(t, out, env["SVC_AUDIT_LOG"])
	assert.Contains(t, out, "--init")
	assert.NoFileExists(t, env["SVC_HOLDS_PATH"])
	q := startEngineArgs(t, env, "--init")
	assert.Equal(t, 200, q.decide(t, envelope(nil)).Status)
}

// TestFreshDatabaseBesideAnEmptyLogStarts checks that a first start, with
// neither database nor audit log, needs no --init; nor does a restart.
func TestFreshDatabaseBesideAnEmptyLogStarts(t *testing.T) {
	env := baseEnv(t)
	p := startEngine(t, env)
	require.Equal(t, 200, p.decide(t, envelope(nil)).Status)
	p.stop(t)
	q := startEngine(t, env)
	require.Equal(t, 200, q.decide(t, envelope(nil)).Status)
}

// TestAuditLogRotatedWhileServing rotates the audit file the way logrotate
// does (rename, or remove) under a running svc: the next decisions go to a
// new file at the configured path, none is lost in the old one.
func TestAuditLogRotatedWhileServing(t *testing.T) {
	for _, rotated := range []string{"audit.jsonl.1", ""} {
		t.Run(map[string]string{"": "removed", "audit.jsonl.1": "renamed"}[rotated], func(t *testing.T) {
			env := baseEnv(t)
			path := env["SVC_AUDIT_LOG"]
			p := startEngine(t, env)
			first := p.decide(t, envelope(nil)).str("decision_id")
			if rotated == "" {
				require.NoError(t, os.Remove(path))
			} else {
				rotated = filepath.Join(filepath.Dir(path), rotated)
				require.NoError(t, os.Rename(path, rotated))
			}
			r := p.decide(t, envelope(nil))
			require.Equal(t, 200, r.Status, "%v", r.Body)

			lines := auditLines(t, path)
			require.Len(t, lines, 1, "the new file at the path holds the decision made since")
			assert.Equal(t, r.str("decision_id"), lines[0]["decision_id"])
			if rotated != "" {
				old := auditLines(t, rotated)
				require.Len(t, old, 1)
				assert.Equal(t, first, old[0]["decision_id"])
			}
			const reopened = "audit log: the file was removed or renamed (rotated); reopening it at its path"
			require.Eventually(t, func() bool { return len(p.logsWith(reopened)) > 0 }, 5*time.Second, 10*time.Millisecond, p.Logs())
			assert.Len(t, p.logsWith(reopened), 1)
		})
	}
}
