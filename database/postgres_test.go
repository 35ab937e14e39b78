package database_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/svc-dev/svc/database"
)

func TestRebind(t *testing.T) {
	for in, want := range map[string]string{
		"SELECT 1":                                "SELECT 1",
		"SELECT a FROM t WHERE b = ? AND c > ?":   "SELECT a FROM t WHERE b = $1 AND c > $2",
		"INSERT INTO t VALUES (?, '?', \"?\", ?)": "INSERT INTO t VALUES ($1, '?', \"?\", $2)",
		"SELECT 'it''s ?' , ?":                    "SELECT 'it''s ?' , $1",
	} {
		assert.Equal(t, want, database.Rebind(in), in)
	}
}

func FuzzRebind(f *testing.F) {
	f.Add("SELECT ? FROM t WHERE a = '?'")
	f.Fuzz(func(t *testing.T, q string) {
		out := database.Rebind(q)
		if len(out) < len(q) {
			t.Fatalf("Rebind shortened %q to %q", q, out)
		}
	})
}

func TestRedactDropsThePassword(t *testing.T) {
	got := database.Redact("postgres://svc:s3cret@db.internal:5433/svc?sslmode=disable")
	assert.Equal(t, "postgres://svc@db.internal:5433/svc", got)
	assert.Equal(t, "(unparseable url)", database.Redact("postgres://svc:s3cret@db:x/svc"))
}
