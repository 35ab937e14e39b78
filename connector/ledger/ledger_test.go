package ledger_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/connector"
	"github.com/svc-dev/svc/connector/ledger"
)

func TestRecordAndRecent(t *testing.T) {
	ctx := context.Background()
	for _, path := range []string{filepath.Join(t.TempDir(), "gw.db"), ""} {
		l, err := ledger.Open(ctx, path, true)
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
	l, err := ledger.Open(context.Background(), filepath.Join(t.TempDir(), "gw.db"), true)
	require.NoError(t, err)
	defer l.Close()
	err = l.Record(context.Background(), []connector.Row{{Outcome: "allow", EnforcementStage: "delivered"}})
	require.Error(t, err, "a row of an unknown stage is not recorded")
}
