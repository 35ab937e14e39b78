package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/ledger"
)

// unusedEvaluator stands in for OPA in tests that decide nothing.
type unusedEvaluator struct{}

func (unusedEvaluator) Evaluate(context.Context, json.RawMessage) (engine.Verdict, error) {
	return engine.Verdict{}, errors.New("no decision expected")
}

// switchRecorder keeps the kill_switch events an engine exports.
type switchRecorder struct {
	mu      sync.Mutex
	actions []string
}

func (r *switchRecorder) Publish(ev engine.Event) {
	if ks, ok := ev.Body.(engine.KillSwitchEvent); ok && ev.Type == engine.EventKillSwitch {
		r.mu.Lock()
		r.actions = append(r.actions, ks.Action)
		r.mu.Unlock()
	}
}

func (r *switchRecorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.actions...)
}

// replicaSwitch opens an engine and its kill switch over the database in
// dir, as one replica of several sharing it.
func replicaSwitch(t *testing.T, dir string, pinned bool) (*engine.Engine, *engine.KillSwitch, *switchRecorder) {
	t.Helper()
	p := openPipeline(t, dir)
	rec := &switchRecorder{}
	e, err := engine.New(engine.Config{Version: "test", Window: time.Hour, HoldTTL: time.Hour}, engine.Deps{
		Evaluator: unusedEvaluator{}, Budgets: p.budgets, Holds: p.holds, Recorder: p.audit,
		Publisher: rec, Logger: zerolog.Nop()})
	require.NoError(t, err)
	store, err := ledger.NewFreeze(context.Background(), p.db)
	require.NoError(t, err)
	k, err := engine.NewKillSwitch(context.Background(), e, store, pinned)
	require.NoError(t, err)
	return e, k, rec
}

// TestKillSwitchSyncAdoptsAnotherReplicasChange: Sync applies the state
// another engine stored, exporting this engine's own kill_switch event
// once per change; a pinned engine stays frozen through a clear.
func TestKillSwitchSyncAdoptsAnotherReplicasChange(t *testing.T) {
	ctx, dir := context.Background(), t.TempDir()
	_, setter, _ := replicaSwitch(t, dir, false)
	follower, followerSwitch, rec := replicaSwitch(t, dir, false)

	_, err := setter.Set(ctx, true, "incident", "human:bob")
	require.NoError(t, err)
	assert.False(t, follower.Frozen(), "not before it syncs")
	require.NoError(t, followerSwitch.Sync(ctx))
	assert.True(t, follower.Frozen())
	assert.Equal(t, "incident", followerSwitch.Query().Reason)
	require.NoError(t, followerSwitch.Sync(ctx))
	assert.Equal(t, []string{"flipped", "queried"}, rec.got(), "one event per change")

	_, err = setter.Set(ctx, false, "resolved", "human:bob")
	require.NoError(t, err)
	require.NoError(t, followerSwitch.Sync(ctx))
	assert.False(t, follower.Frozen())
	assert.Equal(t, []string{"flipped", "queried", "cleared"}, rec.got())

	// A replica started with SVC_FREEZE=true stores its freeze, which the
	// others adopt; cleared through another replica, it stays frozen.
	pinnedEngine, pinnedSwitch, pinnedRec := replicaSwitch(t, dir, true)
	require.NoError(t, followerSwitch.Sync(ctx))
	assert.True(t, follower.Frozen())
	_, err = setter.Set(ctx, false, "over", "human:bob")
	require.NoError(t, err)
	require.NoError(t, pinnedSwitch.Sync(ctx))
	require.NoError(t, followerSwitch.Sync(ctx))
	assert.True(t, pinnedEngine.Frozen(), "SVC_FREEZE pins its own engine")
	assert.False(t, follower.Frozen())
	assert.Equal(t, []string{"flipped"}, pinnedRec.got(), "its start-up freeze only")
	assert.Equal(t, []string{"flipped", "queried", "cleared", "flipped", "cleared"}, rec.got())
}
