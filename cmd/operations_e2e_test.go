package cmd_test

import (
	"database/sql"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/holds"
	"github.com/svc-dev/svc/ledger"
)

// openDB opens the SQLite file at path for a test to read or edit.
func openDB(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func TestSecondWriterOfADatabaseRefused(t *testing.T) {
	env := baseEnv(t)
	first := startEngine(t, env)
	pid := strconv.Itoa(first.cmd.Process.Pid)

	second := baseEnv(t)
	second["SVC_HOLDS_PATH"] = env["SVC_HOLDS_PATH"]
	code, out := runFailing(t, second)
	assert.Equal(t, 2, code, out)
	assert.Contains(t, out, "SVC_HOLDS_PATH")
	assert.Contains(t, out, env["SVC_HOLDS_PATH"])
	assert.Contains(t, out, "process "+pid)

	// Readers are not blocked by the writer's lock.
	r := runSvc(t, env, nil, "migrate", "--check")
	assert.Equal(t, 0, r.code, r.output())
	r = runSvc(t, env, nil, "backup", "--to", filepath.Join(t.TempDir(), "copy.db"))
	assert.Equal(t, 0, r.code, r.output())
	// svc migrate (which writes) is a writer.
	r = runSvc(t, env, nil, "migrate")
	assert.Equal(t, 2, r.code, r.output())
	assert.Contains(t, r.output(), "process "+pid)

	first.stop(t)
	startEngine(t, second) // the lock goes with its process
}

func TestSecondConnectorOnALedgerRefused(t *testing.T) {
	core := startEngine(t, baseEnv(t))
	env := connectorEnv(t, core.URL)
	first := startConnector(t, env)
	r := runSvc(t, env, nil, "connector")
	assert.Equal(t, 2, r.code, r.output())
	assert.Contains(t, r.output(), "SVC_GATEWAY_LEDGER_PATH")
	assert.Contains(t, r.output(), env["SVC_GATEWAY_LEDGER_PATH"])
	assert.Contains(t, r.output(), "process "+strconv.Itoa(first.cmd.Process.Pid))
	r = runSvc(t, env, nil, "connector", "ledger")
	assert.Equal(t, 0, r.code, "svc connector ledger only reads: %s", r.output())
}

// migrations lists the .sql files of fsys in order.
func migrations(t *testing.T, fsys fs.FS) []string {
	names, err := fs.Glob(fsys, "*.sql")
	require.NoError(t, err)
	require.NotEmpty(t, names)
	return names
}

// schemaVersion is this build's version of a part of the schema: the
// number of its last migration.
func schemaVersion(names []string) int {
	n, _ := strconv.Atoi(strings.SplitN(names[len(names)-1], "_", 2)[0])
	return n
}

func TestMigrateCheck(t *testing.T) {
	env := baseEnv(t)
	p := startEngine(t, env)
	p.stop(t)
	lv, hv := schemaVersion(migrations(t, ledger.Migrations())), schemaVersion(migrations(t, holds.Migrations()))
	current := fmt.Sprintf("schema ledger %d, holds %d", lv, hv)

	r := runSvc(t, env, nil, "migrate", "--check")
	assert.Equal(t, 0, r.code, r.output())
	assert.Contains(t, r.stdout, current+", up to date")

	db := openDB(t, env["SVC_HOLDS_PATH"])
	last := migrations(t, holds.Migrations())[len(migrations(t, holds.Migrations()))-1]
	_, err := db.Exec(`DELETE FROM holds_migrations WHERE name = ?`, "migrations/"+last)
	require.NoError(t, err)
	r = runSvc(t, env, nil, "migrate", "--check")
	assert.Equal(t, 3, r.code, r.output())
	assert.Contains(t, r.stdout, "pending holds/"+last)
	_, err = db.Exec(`INSERT INTO holds_migrations (name, applied_ms) VALUES (?, 0)`, "migrations/"+last)
	require.NoError(t, err)

	future := fmt.Sprintf("%04d_future.sql", lv+1)
	_, err = db.Exec(`INSERT INTO migrations (name) VALUES (?)`, "ledger/"+future)
	require.NoError(t, err)
	r = runSvc(t, env, nil, "migrate", "--check")
	assert.Equal(t, 2, r.code, r.output())
	newer := fmt.Sprintf("schema ledger %d, holds %d", lv+1, hv)
	assert.Contains(t, r.stderr, newer)
	assert.Contains(t, r.stderr, "knows "+current)
	assert.Contains(t, r.stderr, future)

	code, out := runFailing(t, env)
	assert.Equal(t, 2, code, out)
	assert.Contains(t, out, newer)
	assert.Contains(t, out, "knows "+current)
	r = runSvc(t, env, nil, "migrate")
	assert.Equal(t, 2, r.code, r.output())
}

func TestMigrateAppliesPendingMigrations(t *testing.T) {
	env := baseEnv(t)
	r := runSvc(t, env, nil, "migrate", "--check")
	assert.Equal(t, 1, r.code, "no database yet: %s", r.output())
	r = runSvc(t, env, nil, "migrate")
	assert.Equal(t, 1, r.code, "svc migrate creates no database: %s", r.output())
	assert.Contains(t, r.stderr, "no database at")

	// A database of an old svc: the first ledger migration only.
	first := migrations(t, ledger.Migrations())[0]
	body, err := fs.ReadFile(ledger.Migrations(), first)
	require.NoError(t, err)
	db := openDB(t, env["SVC_HOLDS_PATH"])
	for _, stmt := range []string{`CREATE TABLE migrations (name TEXT PRIMARY KEY)`, string(body),
		`INSERT INTO migrations (name) VALUES ('ledger/` + first + `')`} {
		_, err := db.Exec(stmt)
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())

	r = runSvc(t, env, nil, "migrate", "--check")
	assert.Equal(t, 3, r.code, r.output())
	assert.Contains(t, r.stdout, "needs migrating")
	assert.Contains(t, r.stdout, "holds/"+migrations(t, holds.Migrations())[0])
	r = runSvc(t, env, nil, "migrate")
	require.Equal(t, 0, r.code, r.output())
	r = runSvc(t, env, nil, "migrate", "--check")
	assert.Equal(t, 0, r.code, r.output())
	p := startEngine(t, env)
	assert.Equal(t, "allow", p.decide(t, envelope(nil)).str("decision"))
}

func TestBackupRefusesAnExistingFile(t *testing.T) {
	env := baseEnv(t)
	startEngine(t, env)
	to := filepath.Join(t.TempDir(), "copy.db")
	require.NoError(t, os.WriteFile(to, []byte("keep me"), 0o600))
	r := runSvc(t, env, nil, "backup", "--to", to)
	assert.Equal(t, 1, r.code, r.output())
	assert.Contains(t, r.stderr, "exists")
	raw, err := os.ReadFile(to)
	require.NoError(t, err)
	assert.Equal(t, "keep me", string(raw))
	r = runSvc(t, map[string]string{}, nil, "backup", "--to", filepath.Join(t.TempDir(), "x.db"))
	assert.Equal(t, 2, r.code, r.output())
	assert.Contains(t, r.stderr, "SVC_HOLDS_PATH")
}

// load is decisions sent by a few goroutines until finish, each of a
// session of its own.
type load struct {
	mu       sync.Mutex
	answered map[string]int // decision id → answers carrying it
	stop     chan struct{}
	wg       sync.WaitGroup
}

// startLoad decides envelopes made by edits (of the worker and its
// request number) from workers goroutines.
func startLoad(t *testing.T, p *engineProc, workers int, edits func(w, i int) map[string]any) *load {
	l := &load{answered: map[string]int{}, stop: make(chan struct{})}
	for w := range workers {
		l.wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				if r := p.decide(t, envelope(edits(w, i))); r.Status == 200 {
					l.mu.Lock()
					l.answered[r.str("decision_id")]++
					l.mu.Unlock()
				}
			}
		})
	}
	return l
}

// count is how many decisions were answered so far.
func (l *load) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.answered)
}

// await waits until n decisions were answered.
func (l *load) await(t *testing.T, n int) {
	require.Eventually(t, func() bool { return l.count() >= n }, 60*time.Second, 10*time.Millisecond)
}

// finish stops the load and returns the answered decisions.
func (l *load) finish() map[string]int {
	close(l.stop)
	l.wg.Wait()
	return l.answered
}

func TestBackupUnderLoadRestoresIntoAFreshEngine(t *testing.T) {
	p, env := holdsEngine(t, nil)
	approved, _ := raiseHold(t, p, nil)
	require.Equal(t, 200, resolve(t, p, "tok-bob", approved, map[string]any{"decision": "approve"}).Status)
	pending, _ := raiseHold(t, p, map[string]any{"params.where": "id > 7"})
	// Each session has an agent and principal of its own, so that only the
	// session budgets are in play (pack v2 counts per agent and principal too).
	spent := map[string]any{"agent.session_id": "spent", "agent.id": "spent", "agent.on_behalf_of": "human:spent",
		"action.verb": "delete", "magnitude.count": 15}
	require.Equal(t, "allow", p.decide(t, envelope(spent)).str("decision"))

	l := startLoad(t, p, 2, func(w, i int) map[string]any {
		s := fmt.Sprintf("load-%d-%d", w, i)
		return map[string]any{"agent.session_id": s, "agent.id": s, "agent.on_behalf_of": "human:" + s,
			"action.verb": "delete", "magnitude.count": 1}
	})
	l.await(t, 5)
	backup := filepath.Join(t.TempDir(), "backup.db")
	r := runSvc(t, env, nil, "backup", "--to", backup)
	require.NotEmpty(t, l.finish())
	require.Equal(t, 0, r.code, r.output())
	fi, err := os.Stat(backup)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	// Restore (docs/operations.md): the copy at SVC_HOLDS_PATH of a fresh
	// engine, checked with svc migrate --check.
	restored := baseEnv(t)
	for _, k := range []string{"SVC_AUTH_TOKEN", "SVC_RESOLVER_TOKENS"} {
		restored[k] = env[k]
	}
	raw, err := os.ReadFile(backup)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(restored["SVC_HOLDS_PATH"], raw, 0o600))
	r = runSvc(t, restored, nil, "migrate", "--check")
	require.Equal(t, 0, r.code, r.output())

	copyDB := openDB(t, backup)
	statuses := map[string]string{}
	rows, err := copyDB.Query(`SELECT id, status FROM holds`)
	require.NoError(t, err)
	for rows.Next() {
		var id, status string
		require.NoError(t, rows.Scan(&id, &status))
		statuses[id] = status
	}
	require.NoError(t, rows.Err())
	var charges int
	require.NoError(t, copyDB.QueryRow(`SELECT count(*) FROM charges`).Scan(&charges))
	require.Equal(t, map[string]string{approved: "approved", pending: "pending"}, statuses)

	q := startEngine(t, restored)
	for id, status := range statuses {
		assert.Equal(t, status, q.call(t, "GET", "/v1/holds/"+id, nil).str("status"), id)
	}
	// The load's charges came along: each of its sessions has spent one
	// delete of its budget of 20.
	loadSessions := map[string]bool{}
	rows, err = copyDB.Query(`SELECT session_id FROM charges WHERE session_id LIKE 'load-%'`)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		loadSessions[s] = true
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, charges-1, len(loadSessions), "every charge but spent's is one load session's")
	for s := range loadSessions {
		over := q.decide(t, envelope(map[string]any{"agent.session_id": s, "agent.id": s, "agent.on_behalf_of": "human:" + s,
			"action.verb": "delete", "magnitude.count": 20}))
		assert.Equal(t, "require_approval", over.str("decision"), "session %s: its charge was restored", s)
		break
	}

	d := q.decide(t, resubmission(approved, nil))
	assert.Equal(t, "allow", d.str("decision"), "%v", d.Body)
	assert.Equal(t, "deny", q.decide(t, resubmission(approved, nil)).str("decision"), "an approval is spent once")
	assert.Equal(t, "deny", q.decide(t, resubmission(pending, map[string]any{"params.where": "id > 7"})).str("decision"))
	spent["magnitude.count"] = 5
	assert.Equal(t, "allow", q.decide(t, envelope(spent)).str("decision"))
	spent["magnitude.count"] = 1
	assert.Equal(t, "require_approval", q.decide(t, envelope(spent)).str("decision"), "the budget kept counting")
}

func TestEngineRetentionPrunesOldSettledHoldsAtStart(t *testing.T) {
	p, env := holdsEngine(t, nil)
	rejected, _ := raiseHold(t, p, nil)
	require.Equal(t, 200, resolve(t, p, "tok-bob", rejected, map[string]any{"decision": "reject"}).Status)
	approved, _ := raiseHold(t, p, map[string]any{"params.where": "id > 7"})
	require.Equal(t, 200, resolve(t, p, "tok-bob", approved, map[string]any{"decision": "approve"}).Status)
	p.stop(t)
	// Both were raised 40 days ago; the approval has a long expiry.
	past := time.Now().Add(-40 * 24 * time.Hour).UnixMilli()
	db := openDB(t, env["SVC_HOLDS_PATH"])
	_, err := db.Exec(`UPDATE holds SET created_ms = ?, decided_ms = ?, expires_ms = CASE id WHEN ? THEN ? ELSE ? END`,
		past, past, approved, time.Now().Add(time.Hour).UnixMilli(), past+1000)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	env["SVC_RETENTION_DAYS"] = "30"
	q := startEngine(t, env)
	require.Eventually(t, func() bool {
		return q.call(t, "GET", "/v1/holds/"+rejected, nil).Status == 404
	}, 30*time.Second, 50*time.Millisecond, "the old rejected hold is pruned at start:\n%s", q.Logs())
	assert.Equal(t, "approved", q.call(t, "GET", "/v1/holds/"+approved, nil).str("status"), "an approved hold stays")
	assert.NotEmpty(t, q.logsWith("retention: pruned"))
	assert.Equal(t, "allow", q.decide(t, resubmission(approved, map[string]any{"params.where": "id > 7"})).str("decision"))
}

func TestConnectorRetentionPrunesOldLedgerRows(t *testing.T) {
	core := startEngine(t, baseEnv(t))
	env := connectorEnv(t, core.URL)
	startConnector(t, env).stop(t) // creates the ledger
	db := openDB(t, env["SVC_GATEWAY_LEDGER_PATH"])
	for _, ts := range []string{time.Now().Add(-40 * 24 * time.Hour).UTC().Format(time.RFC3339Nano), time.Now().UTC().Format(time.RFC3339Nano)} {
		_, err := db.Exec(`INSERT INTO gateway_ledger (ts, outcome, rule, reason, tool, tool_call_id, enforcement_stage,
			released_after_approval, transport, mode, enforced, model, classified_by, gateway_call_id)
			VALUES (?, 'allow', 'r', 'w', 't', ?, 'allowed_at_gateway', 0, 'guardrail_api', 'enforce', 1, 'm', 'c', 'g')`, ts, ts)
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())
	env["SVC_RETENTION_DAYS"] = "30"
	conn := startConnector(t, env)
	require.Eventually(t, func() bool {
		return len(conn.logsWith("retention: pruned")) > 0
	}, 30*time.Second, 50*time.Millisecond, conn.Logs())
	r := runSvc(t, env, nil, "connector", "ledger", "-o", "json")
	require.Equal(t, 0, r.code, r.output())
	assert.Equal(t, 1, strings.Count(r.stdout, `"tool_call_id"`), "the recent row stays: %s", r.stdout)
}

// auditDecisions counts the decision records of the JSONL files at paths.
func auditDecisions(t *testing.T, paths ...string) map[string]int {
	ids := map[string]int{}
	for _, path := range paths {
		for _, rec := range auditLines(t, path) {
			if rec["event"] == "decision" {
				ids[rec["decision_id"].(string)]++
			}
		}
	}
	return ids
}

// openPaths lists the files process pid holds open.
func openPaths(t *testing.T, pid int) []string {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if target, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil {
			out = append(out, target)
		}
	}
	return out
}

func TestNoAnsweredDecisionLostAcrossALogRotation(t *testing.T) {
	env := baseEnv(t)
	p := startEngine(t, env)
	path := env["SVC_AUDIT_LOG"]
	l := startLoad(t, p, 4, func(w, i int) map[string]any {
		return map[string]any{"agent.session_id": fmt.Sprintf("rot-%d-%d", w, i)}
	})
	l.await(t, 20)
	// logrotate's default: rename, then the postrotate SIGHUP.
	require.NoError(t, os.Rename(path, path+".1"))
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGHUP))
	l.await(t, l.count()+20)
	answered := l.finish()

	// Idle, a SIGHUP alone reopens the log: the file is back at its path
	// and the rotated one is no longer held open.
	require.NoError(t, os.Rename(path, path+".2"))
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool { _, err := os.Stat(path); return err == nil }, 30*time.Second, 10*time.Millisecond,
		"svc reopens the log at SIGHUP:\n%s", p.Logs())
	assert.NotContains(t, openPaths(t, p.cmd.Process.Pid), path+".2")
	require.NotEmpty(t, p.logsWith("SIGHUP: audit log reopened"))
	p.stop(t)

	got := auditDecisions(t, path+".1", path+".2", path)
	assert.Equal(t, answered, got, "every answered decision is in the audit log once, across the rotated files")
	assert.NotEmpty(t, auditDecisions(t, path+".1"))
	assert.NotEmpty(t, auditDecisions(t, path+".2"))
}
