package ledger_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/connector"
	"github.com/svc-dev/svc/connector/ledger"
	"github.com/svc-dev/svc/database/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// openers open the ledger on each store: a SQLite file, SQLite in memory,
// and a database of a throwaway PostgreSQL cluster.
func openers(t *testing.T) map[string]func() (*ledger.Ledger, error) {
	ctx := context.Background()
	return map[string]func() (*ledger.Ledger, error){
		"sqlite file":   func() (*ledger.Ledger, error) { return ledger.Open(ctx, filepath.Join(t.TempDir(), "gw.db"), true) },
		"sqlite memory": func() (*ledger.Ledger, error) { return ledger.Open(ctx, "", true) },
		"postgres":      func() (*ledger.Ledger, error) { return ledger.OpenPostgres(ctx, pgtest.URL(t)) },
	}
}

func TestRecordAndRecent(t *testing.T) {
	ctx := context.Background()
	for name, open := range openers(t) {
		t.Log(name)
		l, err := open()
		require.NoError(t, err)
		org, hold := "acme", "h1"
		rows := []connector.Row{
			{Time: time.Unix(1, 0), Outcome: "allow", Rule: "r", Tool: "a", ToolCallID: "c1", EnforcementStage: connector.StageAllowed,
				Transport: connector.TransportGuardrailAPI, Mode: "enforce", Enforced: true, Org: &org, ReleasedAfterApproval: true, HoldID: &hold,
				HoldDecision: &connector.HoldDecision{DecidedBy: &connector.Principal{Type: "human", ID: "alice"}, Resolution: "approved", Verified: true}},
			{Time: time.Unix(2, 0), Outcome: "unmapped", Rule: "r2", Tool: "b", ToolCallID: "c2", EnforcementStage: connector.StageRefused,
				Transport: connector.TransportInProcess, Mode: "enforce"},
		}
		require.NoError(t, l.Record(ctx, rows))
		got, err := l.Recent(ctx, 10)
		require.NoError(t, err)
		require.Len(t, got, 2)
		require.Equal(t, "c2", got[0].ToolCallID, "newest first")
		require.Nil(t, got[0].Org)
		require.Equal(t, rows[0].HoldDecision, got[1].HoldDecision)
		require.Equal(t, "acme", *got[1].Org)
		require.True(t, got[1].ReleasedAfterApproval)
		require.NoError(t, l.Close())
	}
}

func TestRefusedStageIsChecked(t *testing.T) {
	for name, open := range openers(t) {
		l, err := open()
		require.NoError(t, err, name)
		err = l.Record(context.Background(), []connector.Row{{Outcome: "allow", EnforcementStage: "delivered"}})
		require.Error(t, err, "%s: a row of an unknown stage is not recorded", name)
		require.NoError(t, l.Close())
	}
}
