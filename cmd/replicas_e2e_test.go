package cmd_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/database"
	"github.com/svc-dev/svc/database/pgtest"
)

// startReplicas starts n `svc serve` on the PostgreSQL database url, each
// with its own audit log and no SQLite file, sharing the resolver tokens
// and the adapter token; extra settings apply to all.
func startReplicas(t *testing.T, n int, url string, extra map[string]string) []*engineProc {
	t.Helper()
	tokens := filepath.Join(t.TempDir(), "resolvers.json")
	writeTokens(t, tokens, resolverTokens)
	var out []*engineProc
	for range n {
		env := baseEnv(t)
		delete(env, "SVC_HOLDS_PATH")
		env["SVC_DATABASE_URL"] = url
		env["SVC_AUTH_TOKEN"] = "adapter-token"
		env["SVC_RESOLVER_TOKENS"] = tokens
		for k, v := range extra {
			env[k] = v
		}
		out = append(out, startEngine(t, env))
	}
	return out
}

// 64 concurrent deletes of one session spread over three replicas never
// pass the session's limit of 20: the charge and the check are one step
// across replicas.
func TestReplicasShareTheSessionBudget(t *testing.T) {
	// The 64 decisions are serialised: on a loaded machine the last waits
	// longer than the default deadline of 10 s, and is denied.
	rs := startReplicas(t, 3, pgtest.URL(t), map[string]string{"SVC_OPA_TIMEOUT": "120"})
	var wg sync.WaitGroup
	var mu sync.Mutex
	verdicts := map[string]int{}
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rs[i%3].decide(t, envelope(map[string]any{"agent.session_id": "race", "action.verb": "delete"}))
			mu.Lock()
			verdicts[r.str("decision")]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	assert.Equal(t, map[string]int{"allow": 20, "require_approval": 44}, verdicts)
}

// A hold raised on one replica is resolved on another, wakes a long-poll
// waiting on the third, and of 50 concurrent redemptions spread over the
// three exactly one is allowed.
func TestReplicasShareHolds(t *testing.T) {
	rs := startReplicas(t, 3, pgtest.URL(t), map[string]string{"SVC_OPA_TIMEOUT": "120"})
	id, _ := raiseHold(t, rs[0], nil)
	assert.Equal(t, "pending", rs[2].call(t, "GET", "/v1/holds/"+id, nil).str("status"))
	waited := make(chan response, 1)
	go func() { waited <- rs[2].call(t, "GET", "/v1/holds/"+id+"?wait=90", nil) }()
	time.Sleep(500 * time.Millisecond) // let the long-poll start waiting
	require.Equal(t, 200, resolve(t, rs[1], "tok-bob", id, map[string]any{"decision": "approve"}).Status)
	// Unwoken, the long-poll would answer pending after its 90 s.
	assert.Equal(t, "approved", (<-waited).str("status"), "the long-poll wakes on another replica's resolution")

	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[string]int{}
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := rs[i%3].decide(t, resubmission(id, nil))
			mu.Lock()
			counts[d.str("decision")+"/"+d.str("reason")]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	assert.Equal(t, 1, allowsIn(counts), "%v", counts)
	assert.Equal(t, 49, counts["deny/svc_hold_consumed"], "%v", counts)
}

// A freeze set through one replica denies writes on the others within the
// documented bound (FreezeCheckInterval, waited for generously here), and
// a clear through another lifts it everywhere.
func TestReplicasShareTheFreeze(t *testing.T) {
	rs := startReplicas(t, 3, pgtest.URL(t), nil)
	write := map[string]any{"action.verb": "update", "action.ability": "db/update_rows"}
	for _, r := range rs {
		require.Equal(t, "allow", r.decide(t, envelope(write)).str("decision"))
	}
	require.Equal(t, 200, rs[0].call(t, "POST", "/v1/freeze", map[string]any{"frozen": true, "reason": "incident"}).Status)
	waitVerdict := func(r *engineProc, want string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			d := r.decide(t, envelope(write))
			if d.str("decision") == want {
				return
			}
			require.True(t, time.Now().Before(deadline), "replica still answers %v", d.Body)
			time.Sleep(100 * time.Millisecond)
		}
	}
	for _, r := range rs[1:] {
		waitVerdict(r, "deny")
		assert.Equal(t, "svc.policy/frozen", r.decide(t, envelope(write)).str("rule"))
		assert.Equal(t, true, r.call(t, "GET", "/healthz", nil).Body["frozen"])
	}
	require.Equal(t, 200, rs[2].call(t, "POST", "/v1/freeze", map[string]any{"frozen": false, "reason": "resolved"}).Status)
	for _, r := range rs[:2] {
		waitVerdict(r, "allow")
	}
}

// Killing PostgreSQL under load turns decisions into denies
// (svc.core/internal_error), never an allow without its charge; when the
// server is back, the replicas serve again.
func TestReplicasFailClosedWhenPostgresDies(t *testing.T) {
	cluster, err := pgtest.Start()
	require.NoError(t, err)
	t.Cleanup(cluster.Stop)
	url := cluster.NewDatabase(t)
	rs := startReplicas(t, 3, url, map[string]string{"SVC_OPA_TIMEOUT": "5"})

	var allowed sync.Map // decision id → true
	var denied, internal atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				d := rs[w%3].decide(t, envelope(map[string]any{"action.verb": "delete",
					"agent.session_id": fmt.Sprintf("load-%d-%d", w, i)}))
				switch d.str("decision") {
				case "allow":
					allowed.Store(d.str("decision_id"), true)
				default:
					denied.Add(1)
					if d.str("rule") == "svc.core/internal_error" {
						internal.Add(1)
					}
				}
			}
		}()
	}
	time.Sleep(time.Second)
	cluster.Kill()
	time.Sleep(3 * time.Second)
	require.NoError(t, cluster.Restart())
	// Serving resumes once the pools have reconnected.
	for _, r := range rs {
		deadline := time.Now().Add(60 * time.Second)
		for r.decide(t, envelope(map[string]any{"agent.session_id": "after"})).str("decision") != "allow" {
			require.True(t, time.Now().Before(deadline), "replica did not recover")
			time.Sleep(200 * time.Millisecond)
		}
	}
	close(stop)
	wg.Wait()
	assert.Positive(t, internal.Load(), "decisions while PostgreSQL was down are denied as internal errors")

	db, err := sql.Open("pgx", url)
	require.NoError(t, err)
	defer func() { _ = db.Close() }()
	charged := map[string]bool{}
	rows, err := db.QueryContext(context.Background(), `SELECT decision_id FROM charges`)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		charged[id] = true
	}
	require.NoError(t, rows.Err())
	n := 0
	allowed.Range(func(k, _ any) bool {
		n++
		assert.True(t, charged[k.(string)], "allow %s has no charge", k)
		return true
	})
	assert.Positive(t, n)
}

// A decision whose budget subject another replica holds locked past the
// decision deadline (SVC_OPA_TIMEOUT) is denied at that deadline, not left
// waiting; once the lock is released, decisions are allowed again.
func TestReplicaLockWaitEndsAtTheDecisionDeadline(t *testing.T) {
	url := pgtest.URL(t)
	rs := startReplicas(t, 1, url, map[string]string{"SVC_OPA_TIMEOUT": "2"})
	db, err := sql.Open("pgx", url)
	require.NoError(t, err)
	defer func() { _ = db.Close() }()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	// The lock a replica stuck in the middle of a decision of session "stuck" holds.
	key := database.LockKey("subject/s\x00stuck")
	_, err = conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, key)
	require.NoError(t, err)

	start := time.Now()
	d := rs[0].decide(t, envelope(map[string]any{"agent.session_id": "stuck"}))
	assert.Equal(t, 500, d.Status)
	assert.Equal(t, "deny", d.str("decision"))
	assert.Equal(t, "svc.core/internal_error", d.str("rule"))
	assert.Less(t, time.Since(start), 30*time.Second, "the wait ends at the deadline, not never")

	_, err = conn.ExecContext(ctx, `SELECT pg_advisory_unlock($1)`, key)
	require.NoError(t, err)
	assert.Equal(t, "allow", rs[0].decide(t, envelope(map[string]any{"agent.session_id": "stuck"})).str("decision"))
}
