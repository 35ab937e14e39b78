package holds

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
)

func TestServiceSweepRecordsAndPublishes(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, verifiedConfig(t))
	mustCreate(t, f.store, newHold("a", t0), newHold("b", t0.Add(time.Millisecond)), newHold("c", t0.Add(time.Hour)))
	_, err := f.svc.Resolve(ctx, approve("b", "tok-alice"))
	require.NoError(t, err)
	_, before := f.rec.snapshot()

	at := t0.Add(time.Hour + time.Millisecond)
	f.clock.Set(at)
	require.NoError(t, f.svc.Sweep(ctx))

	kinds, recs := f.rec.snapshot()
	recs = recs[len(before):]
	require.Equal(t, []string{engine.EventHoldResolution, engine.EventHoldResolution, engine.EventHoldResolution}, kinds)
	require.Len(t, recs, 2)
	for i, id := range []string{"a", "b"} {
		require.Equal(t, engine.EventHoldResolution, recs[i].Event)
		require.Equal(t, id, recs[i].HoldID)
		require.Equal(t, engine.HoldExpired, recs[i].Status)
		require.Equal(t, engine.FormatTime(at), recs[i].TS)
	}
	require.Nil(t, recs[0].DecidedBy)
	require.Equal(t, "alice", recs[1].DecidedBy.ID, "an approved hold's expiry keeps who approved it")

	var expired []engine.HoldEvent
	for _, ev := range f.pub.snapshot() {
		if ev.Type == engine.EventHoldExpired {
			body := ev.Body.(engine.HoldEvent)
			require.Equal(t, engine.EventHoldExpired, body.Event)
			expired = append(expired, body)
		}
	}
	require.Len(t, expired, 2)

	require.NoError(t, f.svc.Sweep(ctx))
	_, again := f.rec.snapshot()
	require.Len(t, again, len(before)+2, "a second sweep records nothing")
}

func TestServiceSweepAuditFailureStillExpires(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, verifiedConfig(t))
	mustCreate(t, f.store, newHold("a", t0))
	f.rec.fail(errors.New("disk full"))
	f.clock.Set(t0.Add(2 * time.Hour))

	err := f.svc.Sweep(ctx)
	require.ErrorContains(t, err, "audit expiry of hold a")
	page, err := f.store.List(ctx, engine.HoldQuery{Status: engine.HoldExpired, Now: t0})
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, holdIDs(page.Items))
	require.Len(t, f.pub.snapshot(), 1)
}

func TestServiceRun(t *testing.T) {
	f := newFixture(t, verifiedConfig(t))
	require.Error(t, f.svc.Run(context.Background(), 0))

	mustCreate(t, f.store, newHold("a", t0), newHold("b", t0.Add(time.Minute)))
	f.pub.ch = make(chan engine.Event, 4)
	f.clock.Set(t0.Add(2 * time.Hour))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.svc.Run(ctx, time.Millisecond) }()

	for _, id := range []string{"a", "b"} {
		select {
		case ev := <-f.pub.ch:
			require.Equal(t, engine.EventHoldExpired, ev.Type)
			require.Equal(t, id, ev.Body.(engine.HoldEvent).HoldID)
		case <-time.After(5 * time.Second):
			t.Fatal("no hold.expired event")
		}
	}
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}
