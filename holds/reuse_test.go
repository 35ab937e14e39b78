package holds

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
)

// boundHold is newHold raised through gate "" with the envelope and params
// hashes of an action, so that it has a binding.
func boundHold(id string, created time.Time) engine.Hold {
	h := newHold(id, created)
	gate := ""
	h.Gate, h.EnvelopeHash, h.ParamsHash = &gate, "ehash", "phash"
	return h
}

// TestReusableFindsTheLiveHoldOfABinding: a hold is found under its
// binding while pending or approved and unexpired, with an approved one
// first; never once rejected, consumed or expired; and a hold that differs
// in hash, actor or gate, or has no gate, has another binding or none.
func TestReusableFindsTheLiveHoldOfABinding(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	h := boundHold("a", t0)
	binding := engine.HoldBinding(&h)
	require.NotEmpty(t, binding)
	mustCreate(t, s, h)

	got, err := s.Reusable(ctx, binding, t0.Add(time.Minute))
	require.NoError(t, err)
	assert.Equal(t, "a", got.ID)
	assert.Equal(t, engine.HoldPending, got.Status)

	_, err = s.Reusable(ctx, binding, t0.Add(time.Hour))
	requireErr(t, err, ErrNotFound, nil)
	_, err = s.Reusable(ctx, "", t0)
	requireErr(t, err, ErrNotFound, nil)

	approve := engine.HoldResolution{Status: engine.HoldApproved, By: engine.Principal{Type: TypeHuman, ID: "alice"},
		Verified: true, At: t0.Add(time.Second)}
	_, err = s.Resolve(ctx, "a", approve)
	require.NoError(t, err)
	got, err = s.Reusable(ctx, binding, t0.Add(time.Minute))
	require.NoError(t, err)
	assert.Equal(t, engine.HoldApproved, got.Status, "approved and not consumed is live")

	_, err = s.Consume(ctx, "a", "dec-x", t0.Add(2*time.Second))
	require.NoError(t, err)
	_, err = s.Reusable(ctx, binding, t0.Add(time.Minute))
	requireErr(t, err, ErrNotFound, nil)

	other := map[string]func(*engine.Hold){
		"envelope hash": func(h *engine.Hold) { h.EnvelopeHash = "other" },
		"params hash":   func(h *engine.Hold) { h.ParamsHash = "other" },
		"agent":         func(h *engine.Hold) { h.Envelope.Agent.ID = "agent-8" },
		"on behalf of":  func(h *engine.Hold) { h.Envelope.Agent.OnBehalfOf = "human:dave" },
		"gate": func(h *engine.Hold) {
			g := "gate-a"
			h.Gate = &g
		},
	}
	for name, edit := range other {
		h := boundHold("x", t0)
		edit(&h)
		assert.NotEqual(t, binding, engine.HoldBinding(&h), name)
	}
	h = boundHold("y", t0)
	h.Envelope.Agent.ID, h.Envelope.Agent.SessionID = "ＡＧＥＮＴ-7", "another-session"
	assert.Equal(t, binding, engine.HoldBinding(&h), "agent ids compare folded; the session is not bound")
	h.Gate = nil
	assert.Empty(t, engine.HoldBinding(&h), "a hold without a recorded gate is never reused")
}

// TestCreateRefusesAnIdenticalLiveHold: creating a hold while one of the
// same binding is live is refused naming the live hold, and writes
// nothing; once that hold is rejected, a new one is created.
func TestCreateRefusesAnIdenticalLiveHold(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	mustCreate(t, s, boundHold("a", t0))
	err := s.Create(ctx, boundHold("b", t0.Add(time.Second)))
	requireErr(t, err, engine.ErrIdenticalHold, map[string]any{"hold_id": "a"})
	_, err = s.Get(ctx, "b", t0)
	requireErr(t, err, ErrNotFound, nil)

	_, err = s.Resolve(ctx, "a", engine.HoldResolution{Status: engine.HoldRejected,
		By: engine.Principal{Type: TypeHuman, ID: "alice"}, Verified: true, At: t0.Add(2 * time.Second)})
	require.NoError(t, err)
	mustCreate(t, s, boundHold("b", t0.Add(3*time.Second)))
	mustCreate(t, s, boundHold("c", t0.Add(2*time.Hour)), newHold("d", t0), newHold("e", t0))
}

// TestCreateConcurrentIdenticalHoldsOne: of many concurrent creations of
// identical holds, one succeeds and every other is refused naming it.
func TestCreateConcurrentIdenticalHoldsOne(t *testing.T) {
	s := newTestStore(t)
	wins, errs := race(50, func(i int) error { return s.Create(context.Background(), boundHold(seqID(i), t0)) })
	require.Equal(t, 1, wins)
	require.Len(t, errs, 49)
	page, err := s.List(context.Background(), engine.HoldQuery{Status: "all", Limit: 100, Now: t0})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	for _, err := range errs {
		requireErr(t, err, engine.ErrIdenticalHold, map[string]any{"hold_id": page.Items[0].ID})
	}
}
