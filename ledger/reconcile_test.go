package ledger_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/ledger"
)

// crashState is a database and audit file as a crash between the two
// writes of a batch leaves them: the file holds lines the mirror does not.
type crashState struct {
	dbPath, logPath string
}

// openState opens the database and the audit log of s, as svc starts.
func (s crashState) open(t *testing.T, log *ledger.LogBuffer) (*ledger.DB, *ledger.Audit) {
	t.Helper()
	db, err := ledger.Open(context.Background(), s.dbPath, ledger.DurabilityFull)
	require.NoError(t, err)
	a, err := ledger.NewAudit(context.Background(), db, s.logPath, nil, zerolog.New(log))
	require.NoError(t, err)
	return db, a
}

func closeBoth(t *testing.T, db *ledger.DB, a *ledger.Audit) {
	t.Helper()
	require.NoError(t, a.Close())
	require.NoError(t, db.Close())
}

// appendRaw appends lines to the file as a batch whose commit never came
// would have left them.
func appendRaw(t *testing.T, path string, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o600)
	require.NoError(t, err)
	for _, l := range lines {
		_, err := f.WriteString(l)
		require.NoError(t, err)
	}
	require.NoError(t, f.Close())
}

func lineOf(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	return string(raw)
}

func sha(line string) string {
	sum := sha256.Sum256([]byte(line))
	return hex.EncodeToString(sum[:])
}

// voids returns the line_sha256 of the voided records of the file that
// give reason. A torn line, which is not JSON, is skipped.
func voids(t *testing.T, path, reason string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []string
	for _, line := range strings.Split(string(raw), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		if rec["event"] == ledger.KindVoided && rec["reason"] == reason {
			out = append(out, rec["line_sha256"].(string))
		}
	}
	return out
}

const crashReason = "not committed before a crash"

func TestReconcileVoidsWhatACrashLeftUncommitted(t *testing.T) {
	dir := t.TempDir()
	s := crashState{dbPath: filepath.Join(dir, "svc.db"), logPath: filepath.Join(dir, "audit.jsonl")}
	var log ledger.LogBuffer
	db, a := s.open(t, &log)
	for _, id := range []string{"d1", "d2"} {
		require.NoError(t, a.Record(context.Background(), engine.EventDecision, decision(id)))
	}
	closeBoth(t, db, a)

	// The batch in flight at the crash: an allow and its hold's consumption,
	// a degraded deny (answered; it may be in the file alone), a line kept
	// and voided by a failed batch, and a torn line.
	allow := lineOf(t, decision("d3"))
	consumed := lineOf(t, engine.HoldEvent{Event: engine.EventHoldResolution, HoldID: "h1", Status: engine.HoldConsumed, DecisionID: "d3"})
	degraded := lineOf(t, engine.DegradedDecisionEvent{DecisionEvent: decision("d4"), Degraded: true, AuditError: "x"})
	kept := lineOf(t, decision("d5"))
	keptVoid := lineOf(t, map[string]string{"event": ledger.KindVoided, "line_sha256": sha(kept), "reason": "batch not committed"})
	torn := `{"ts":"2026-11-26T10:00:00.000Z","event":"deci`
	appendRaw(t, s.logPath, kept+"\n", keptVoid+"\n", degraded+"\n", allow+"\n", consumed+"\n", torn)

	db, a = s.open(t, &log)
	assert.Equal(t, []string{sha(allow), sha(consumed), sha(torn)}, voids(t, s.logPath, crashReason),
		"the lines after the last committed one, the ones a batch commits")
	assert.Equal(t, 1, log.Count("lines of a batch not committed before a crash were voided"))
	assert.Contains(t, log.String(), `"decision_ids":["d3","d3"]`)
	require.NoError(t, a.Record(context.Background(), engine.EventDecision, decision("d6")))
	closeBoth(t, db, a)

	db, a = s.open(t, &log)
	defer closeBoth(t, db, a)
	assert.Len(t, voids(t, s.logPath, crashReason), 3, "a restart voids nothing twice")
	assert.Equal(t, 1, log.Count("were voided"))
}

func TestReconcileFirstBatchOfADatabase(t *testing.T) {
	dir := t.TempDir()
	s := crashState{dbPath: filepath.Join(dir, "svc.db"), logPath: filepath.Join(dir, "audit.jsonl")}
	var log ledger.LogBuffer
	db, a := s.open(t, &log)
	closeBoth(t, db, a)
	allow := lineOf(t, decision("d1"))
	appendRaw(t, s.logPath, allow+"\n")

	db, a = s.open(t, &log)
	defer closeBoth(t, db, a)
	assert.Equal(t, []string{sha(allow)}, voids(t, s.logPath, crashReason), "nothing was ever committed")
}

func TestReconcileLeavesAnotherDatabasesLogAlone(t *testing.T) {
	dir := t.TempDir()
	s := crashState{dbPath: filepath.Join(dir, "svc.db"), logPath: filepath.Join(dir, "audit.jsonl")}
	require.NoError(t, os.WriteFile(s.logPath, []byte(lineOf(t, decision("old"))+"\n"), 0o600))

	var log ledger.LogBuffer
	db, a := s.open(t, &log)
	defer closeBoth(t, db, a)
	assert.True(t, db.Created())
	assert.Empty(t, voids(t, s.logPath, crashReason), "a database created now committed none of the file's lines")
}

func TestReconcileCommittedTailVoidsNothing(t *testing.T) {
	dir := t.TempDir()
	s := crashState{dbPath: filepath.Join(dir, "svc.db"), logPath: filepath.Join(dir, "audit.jsonl")}
	var log ledger.LogBuffer
	db, a := s.open(t, &log)
	for _, id := range []string{"d1", "d2", "d3"} {
		require.NoError(t, a.Record(context.Background(), engine.EventDecision, decision(id)))
	}
	closeBoth(t, db, a)
	before, err := os.ReadFile(s.logPath)
	require.NoError(t, err)

	db, a = s.open(t, &log)
	defer closeBoth(t, db, a)
	after, err := os.ReadFile(s.logPath)
	require.NoError(t, err)
	assert.Equal(t, before, after)
}
