package holds

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
)

func verifiedConfig(t *testing.T) Config {
	cfg := DefaultConfig()
	cfg.ResolverTokens = writeTokens(t, t.TempDir(), testTokens)
	return cfg
}

func approve(id, credential string) engine.ResolveRequest {
	return engine.ResolveRequest{HoldID: id, Credential: credential, Decision: DecisionApprove, Reason: "looks fine"}
}

func TestResolveRefusals(t *testing.T) {
	human := &engine.Principal{Type: "human", ID: "dave"}
	tests := []struct {
		name    string
		cfg     func(*Config)
		rule    string                        // of hold "h", when not the default
		prepare func(t *testing.T, f fixture) // after hold "h" is created
		req     engine.ResolveRequest
		want    *engine.Error
		fields  map[string]any
	}{
		{name: "unknown hold, even with a bad decision", req: engine.ResolveRequest{HoldID: "ghost", Decision: "maybe"},
			want: ErrNotFound, fields: map[string]any{"hold_id": "ghost"}},
		{name: "decision not approve or reject", req: engine.ResolveRequest{HoldID: "h", Credential: "tok-alice", Decision: "Approve"},
			want: &engine.Error{Code: engine.EINVALID}, fields: map[string]any{"field": "decision"}},
		{name: "empty decision", req: engine.ResolveRequest{HoldID: "h", Credential: "tok-alice"},
			want: &engine.Error{Code: engine.EINVALID}, fields: map[string]any{"field": "decision"}},
		{name: "reason too long", req: engine.ResolveRequest{HoldID: "h", Credential: "tok-alice", Decision: DecisionReject,
			Reason: strings.Repeat("x", MaxReasonBytes+1)}, want: &engine.Error{Code: engine.EINVALID}, fields: map[string]any{"field": "reason"}},
		{name: "verification on, no tokens configured", cfg: func(c *Config) { c.ResolverTokens = "" },
			req: approve("h", "tok-alice"), want: ErrNotVerified, fields: map[string]any{"hold_id": "h"}},
		{name: "verification on, empty token object", cfg: func(c *Config) { c.ResolverTokens = " {} " },
			req: approve("h", "tok-alice"), want: ErrNotVerified},
		{name: "unbound credential", req: approve("h", "tok-mallory"), want: ErrNotVerified},
		{name: "no credential", req: approve("h", ""), want: ErrNotVerified},
		{name: "asserted principal ignored when verification is on",
			req:  engine.ResolveRequest{HoldID: "h", Credential: "admin-token", Decision: DecisionApprove, Asserted: human},
			want: ErrNotVerified},
		{name: "verification off, nothing asserted", cfg: func(c *Config) { c.RequireVerified = false },
			req: approve("h", "admin-token"), want: &engine.Error{Code: engine.EINVALID}, fields: map[string]any{"field": "principal"}},
		{name: "verification off, unknown type asserted", cfg: func(c *Config) { c.RequireVerified = false },
			req:  engine.ResolveRequest{HoldID: "h", Decision: DecisionApprove, Asserted: &engine.Principal{Type: "robot", ID: "r"}},
			want: &engine.Error{Code: engine.EINVALID}, fields: map[string]any{"field": "principal"}},
		{name: "verification off, blank id asserted", cfg: func(c *Config) { c.RequireVerified = false },
			req:  engine.ResolveRequest{HoldID: "h", Decision: DecisionApprove, Asserted: &engine.Principal{Type: "human", ID: "\u200b "}},
			want: &engine.Error{Code: engine.EINVALID}, fields: map[string]any{"field": "principal"}},
		{name: "already rejected", prepare: resolveFirst(DecisionReject), req: approve("h", "tok-alice"),
			want: ErrNotResolvable, fields: map[string]any{"status": engine.HoldRejected, "hold_id": "h"}},
		{name: "already approved", prepare: resolveFirst(DecisionApprove), req: approve("h", "tok-alice"),
			want: ErrNotResolvable, fields: map[string]any{"status": engine.HoldApproved}},
		{name: "expired", prepare: advance(time.Hour), req: approve("h", "tok-alice"),
			want: ErrNotResolvable, fields: map[string]any{"status": engine.HoldExpired}},
		{name: "expired and swept", prepare: sweptAt(time.Hour), req: engine.ResolveRequest{HoldID: "h", Credential: "tok-alice", Decision: DecisionReject},
			want: ErrNotResolvable, fields: map[string]any{"status": engine.HoldExpired}},
		{name: "default terminal rule", rule: DefaultTerminalRule, req: approve("h", "tok-alice"),
			want: ErrNotResolvable, fields: map[string]any{"status": engine.HoldPending}},
		{name: "configured terminal rule", cfg: func(c *Config) { c.TerminalRules = []string{"svc.policy/custom"} },
			rule: "svc.policy/custom", req: engine.ResolveRequest{HoldID: "h", Credential: "tok-alice", Decision: DecisionReject},
			want: ErrNotResolvable, fields: map[string]any{"status": engine.HoldPending}},
		{name: "approver is the principal acted for", req: approve("h", "tok-carol"),
			want: ErrActorIsApprover, fields: map[string]any{"principal": "human:Carol"}},
		{name: "agent type not allowed by default", req: approve("h", "tok-bot"),
			want: ErrTypeNotAllowed, fields: map[string]any{"principal": "agent:bot-1", "allowed": []string{"human"}}},
		{name: "automation type not allowed by default", req: engine.ResolveRequest{HoldID: "h", Credential: "tok-ci", Decision: DecisionReject},
			want: ErrTypeNotAllowed},
		// Order: identity before state, state before four eyes and policy.
		{name: "unbound credential on an expired hold is 403", prepare: advance(2 * time.Hour), req: approve("h", "tok-mallory"),
			want: ErrNotVerified},
		{name: "actor on an expired hold is 409", prepare: advance(2 * time.Hour), req: approve("h", "tok-carol"),
			want: ErrNotResolvable, fields: map[string]any{"status": engine.HoldExpired}},
		{name: "agent type on a rejected hold is 409", prepare: resolveFirst(DecisionReject), req: approve("h", "tok-bot"),
			want: ErrNotResolvable},
		{name: "invalid tokens file refuses", prepare: rewriteTokens(`{"tok-alice": {"type": "human"`), req: approve("h", "tok-alice"),
			want: ErrTokensUnavailable},
		{name: "missing tokens file refuses even when verification is off", cfg: func(c *Config) { c.RequireVerified = false },
			prepare: removeTokens, req: engine.ResolveRequest{HoldID: "h", Decision: DecisionApprove, Asserted: human},
			want: ErrTokensUnavailable},
		{name: "tokens entry with an unknown type refuses", prepare: rewriteTokens(`{"tok-alice": {"type": "admin", "id": "alice"}}`),
			req: approve("h", "tok-alice"), want: ErrTokensUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := verifiedConfig(t)
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			f := newFixture(t, cfg)
			h := newHold("h", t0)
			if tt.rule != "" {
				h.Rule = tt.rule
			}
			mustCreate(t, f.store, h)
			if tt.prepare != nil {
				tt.prepare(t, f)
			}
			_, before := f.rec.snapshot()
			beforeHold, _ := f.store.Get(context.Background(), "h", f.clock.Now())

			_, err := f.svc.Resolve(context.Background(), tt.req)
			requireErr(t, err, tt.want, tt.fields)

			_, after := f.rec.snapshot()
			require.Len(t, after, len(before), "a refusal writes no audit line")
			afterHold, _ := f.store.Get(context.Background(), "h", f.clock.Now())
			require.Equal(t, beforeHold, afterHold, "a refusal changes nothing")
		})
	}
}

func resolveFirst(decision string) func(*testing.T, fixture) {
	return func(t *testing.T, f fixture) {
		_, err := f.svc.Resolve(context.Background(),
			engine.ResolveRequest{HoldID: "h", Credential: "tok-alice", Decision: decision})
		require.NoError(t, err)
	}
}

func advance(d time.Duration) func(*testing.T, fixture) {
	return func(_ *testing.T, f fixture) { f.clock.Set(t0.Add(d)) }
}

func sweptAt(d time.Duration) func(*testing.T, fixture) {
	return func(t *testing.T, f fixture) {
		f.clock.Set(t0.Add(d))
		require.NoError(t, f.svc.Sweep(context.Background()))
		f.clock.Set(t0.Add(time.Minute)) // even read "before" expiry, the sweep is recorded
	}
}

func rewriteTokens(body string) func(*testing.T, fixture) {
	return func(t *testing.T, f fixture) {
		require.NoError(t, os.WriteFile(f.svc.cfg.ResolverTokens, []byte(body), 0o600))
	}
}

func removeTokens(t *testing.T, f fixture) {
	require.NoError(t, os.Remove(f.svc.cfg.ResolverTokens))
}

// TestVetAnswersAsResolveWithoutResolving checks that Vet refuses whom
// Resolve refuses, with the same error, and admits whom it admits, while
// changing nothing: no transition, no audit record, no event.
func TestVetAnswersAsResolveWithoutResolving(t *testing.T) {
	tests := []struct {
		name       string
		credential string
		prepare    func(t *testing.T, f fixture)
		want       *engine.Error // nil: admitted
	}{
		{name: "verified human", credential: "tok-alice"},
		{name: "principal acted for (four eyes)", credential: "tok-carol", want: ErrActorIsApprover},
		{name: "agent type not allowed", credential: "tok-bot", want: ErrTypeNotAllowed},
		{name: "unbound token", credential: "tok-mallory", want: ErrNotVerified},
		{name: "not pending", credential: "tok-alice", prepare: resolveFirst(DecisionReject), want: ErrNotResolvable},
		{name: "tokens unreadable", credential: "tok-alice", prepare: removeTokens, want: ErrTokensUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, verifiedConfig(t))
			mustCreate(t, f.store, newHold("h", t0))
			if tt.prepare != nil {
				tt.prepare(t, f)
			}
			kinds, _ := f.rec.snapshot()
			before, err := f.store.Get(context.Background(), "h", f.clock.Now())
			require.NoError(t, err)

			h, err := f.svc.Vet(context.Background(), engine.ResolveRequest{HoldID: "h", Credential: tt.credential})
			require.Equal(t, "h", h.ID, "Vet returns the hold it vetted")
			if tt.want == nil {
				require.NoError(t, err)
			} else {
				requireErr(t, err, tt.want, nil)
				_, resolveErr := f.svc.Resolve(context.Background(), approve("h", tt.credential))
				require.Equal(t, err.Error(), resolveErr.Error(), "Vet and Resolve refuse alike")
			}
			after, err := f.store.Get(context.Background(), "h", f.clock.Now())
			require.NoError(t, err)
			require.Equal(t, before, after)
			kindsAfter, _ := f.rec.snapshot()
			require.Equal(t, kinds, kindsAfter)
		})
	}
	_, err := newFixture(t, verifiedConfig(t)).svc.Vet(context.Background(), engine.ResolveRequest{HoldID: "ghost"})
	requireErr(t, err, ErrNotFound, nil)
}

func TestNotVerifiedRemedy(t *testing.T) {
	tests := []struct {
		name, tokens, why string
		asserted          *engine.Principal
		principal         *string
	}{
		{"not configured", "", whyNotConfigured, nil, nil},
		{"empty token object", "{}", whyNotConfigured, nil, nil},
		{"unbound", testTokens, whyUnbound, &engine.Principal{Type: "human", ID: "dave"}, ptr("human:dave")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.ResolverTokens = tt.tokens
			f := newFixture(t, cfg)
			mustCreate(t, f.store, newHold("h", t0))
			_, err := f.svc.Resolve(context.Background(), engine.ResolveRequest{
				HoldID: "h", Credential: "tok-mallory", Decision: DecisionApprove, Asserted: tt.asserted})
			e := requireErr(t, err, ErrNotVerified, map[string]any{"hold_id": "h"})
			require.Equal(t, "principal_not_verified", e.Name)
			require.Equal(t, engine.EFORBIDDEN, e.Code)
			require.NotEmpty(t, e.Fields["reason"])
			r := e.Fields["remedy"].(remedy)
			require.Equal(t, tt.why, r.Why)
			require.Equal(t, tt.principal, r.Principal)
			require.NotEmpty(t, r.Actions)
			require.Equal(t, RemedyDocs, r.Docs)
		})
	}
}

func ptr(s string) *string { return &s }

func TestResolveApplies(t *testing.T) {
	tests := []struct {
		name     string
		verified bool // RequireVerified
		req      engine.ResolveRequest
		status   string
		by       engine.Principal
		verFlag  bool
	}{
		{"verified approve", true, approve("h", "tok-alice"), engine.HoldApproved, engine.Principal{Type: "human", ID: "alice"}, true},
		{"verified reject", true, engine.ResolveRequest{HoldID: "h", Credential: "tok-alice", Decision: DecisionReject, Reason: "looks fine"},
			engine.HoldRejected, engine.Principal{Type: "human", ID: "alice"}, true},
		{"asserted approve when verification is off", false,
			engine.ResolveRequest{HoldID: "h", Credential: "admin-token", Decision: DecisionApprove, Reason: "looks fine",
				Asserted: &engine.Principal{Type: " Human ", ID: " dave "}},
			engine.HoldApproved, engine.Principal{Type: "human", ID: "dave"}, false},
		{"token wins over an asserted principal", false,
			engine.ResolveRequest{HoldID: "h", Credential: "tok-alice", Decision: DecisionApprove, Reason: "looks fine",
				Asserted: &engine.Principal{Type: "human", ID: "dave"}},
			engine.HoldApproved, engine.Principal{Type: "human", ID: "alice"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := verifiedConfig(t)
			cfg.RequireVerified = tt.verified
			f := newFixture(t, cfg)
			mustCreate(t, f.store, newHold("h", t0))
			now := f.clock.Now()

			h, err := f.svc.Resolve(context.Background(), tt.req)
			require.NoError(t, err)
			require.Equal(t, tt.status, h.Status)
			require.Equal(t, &tt.by, h.DecidedBy)
			require.Equal(t, tt.verFlag, *h.DecidedByVerified)
			require.True(t, h.DecidedTS.Equal(now))
			require.Equal(t, "looks fine", h.ResolutionReason)

			stored, err := f.store.Get(context.Background(), "h", now)
			require.NoError(t, err)
			require.Equal(t, h, stored)

			kinds, recs := f.rec.snapshot()
			require.Equal(t, []string{engine.EventHoldResolution}, kinds)
			want := engine.HoldEvent{
				Event: engine.EventHoldResolution, TS: engine.FormatTime(now), HoldID: "h",
				RuleID: "svc.policy/irreversible_broad_prod", Status: tt.status, ExpiresTS: engine.FormatTime(t0.Add(time.Hour)),
				DecisionID: "dec-h", SessionID: "sess-1", AgentID: "agent-7", Ability: "fs/delete", Environment: "production",
				EnvelopeHash: "ehash-h", DecidedBy: &tt.by, DecidedTS: engine.FormatTime(now),
				DecidedByVerified: &tt.verFlag, Reason: "looks fine",
			}
			require.Equal(t, []engine.HoldEvent{want}, recs)
			want.Event = engine.EventHoldResolved
			require.Equal(t, []engine.Event{{Type: engine.EventHoldResolved, Body: want}}, f.pub.snapshot())
		})
	}
}

func TestResolveRequestTimeWins(t *testing.T) {
	f := newFixture(t, verifiedConfig(t))
	mustCreate(t, f.store, newHold("h", t0))
	req := approve("h", "tok-alice")
	req.Now = t0.Add(2 * time.Hour) // the service clock says t0+1m
	_, err := f.svc.Resolve(context.Background(), req)
	requireErr(t, err, ErrNotResolvable, map[string]any{"status": engine.HoldExpired})
}

func TestTokensFileReloadedWithoutRestart(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, verifiedConfig(t))
	mustCreate(t, f.store, newHold("h1", t0), newHold("h2", t0), newHold("h3", t0))
	path := f.svc.cfg.ResolverTokens

	_, err := f.svc.Resolve(ctx, approve("h1", "tok-alice"))
	require.NoError(t, err)
	require.True(t, identified(f.svc, "tok-alice"))
	require.False(t, identified(f.svc, "tok-erin"))

	require.NoError(t, os.WriteFile(path, []byte(`{"tok-erin": {"type": "human", "id": "erin"}}`), 0o600))
	_, err = f.svc.Resolve(ctx, approve("h2", "tok-alice"))
	requireErr(t, err, ErrNotVerified, nil)
	require.False(t, identified(f.svc, "tok-alice"))
	require.True(t, identified(f.svc, "tok-erin"))
	h, err := f.svc.Resolve(ctx, approve("h2", "tok-erin"))
	require.NoError(t, err)
	require.Equal(t, "erin", h.DecidedBy.ID)

	const secret = "s3cret-token-value"
	require.NoError(t, os.WriteFile(path, []byte(`{"`+secret+`": {"type": "human", "id": "erin"},,}`), 0o600))
	_, err = f.svc.Resolve(ctx, approve("h3", "tok-erin"))
	requireErr(t, err, ErrTokensUnavailable, nil)
	require.NotContains(t, err.Error(), secret)
	require.False(t, identified(f.svc, "tok-erin"), "an unreadable tokens file authenticates nobody")
	_, _, err = f.svc.Identify("tok-erin")
	requireErr(t, err, ErrTokensUnavailable, nil)
	require.NotContains(t, err.Error(), secret)

	require.NoError(t, os.WriteFile(path, []byte(testTokens), 0o600))
	_, err = f.svc.Resolve(ctx, approve("h3", "tok-alice"))
	require.NoError(t, err)
}

func TestKnows(t *testing.T) {
	f := newFixture(t, verifiedConfig(t))
	for token, want := range map[string]bool{
		"tok-alice": true, "tok-ci": true, "": false, "tok-alic": false, "tok-alice ": false, "TOK-ALICE": false,
	} {
		assert.Equal(t, want, identified(f.svc, token), "token %q", token)
	}
	inline := DefaultConfig()
	inline.ResolverTokens = ` {"inline-tok": {"type": "agent", "id": "x"}}`
	g := newFixture(t, inline)
	assert.True(t, identified(g.svc, "inline-tok"))
	none := newFixture(t, DefaultConfig())
	assert.False(t, identified(none.svc, "anything"))
	p, ok, err := g.svc.Identify("inline-tok")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, engine.Principal{Type: "agent", ID: "x"}, p)
}

func TestAuditFailureLeavesResolutionUnapplied(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, verifiedConfig(t))
	mustCreate(t, f.store, newHold("h", t0))
	f.rec.fail(errors.New("disk full"))

	_, err := f.svc.Resolve(ctx, approve("h", "tok-alice"))
	requireErr(t, err, ErrAuditUnavailable, map[string]any{"hold_id": "h"})
	require.Equal(t, engine.EINTERNAL, engine.ErrorCode(err))
	h, err := f.store.Get(ctx, "h", f.clock.Now())
	require.NoError(t, err)
	require.Equal(t, engine.HoldPending, h.Status)
	require.Nil(t, h.DecidedBy)
	require.Nil(t, h.DecidedByVerified)
	require.Empty(t, f.pub.snapshot(), "nothing is published for a reverted resolution")
	_, err = f.store.Consume(ctx, "h", "d", f.clock.Now())
	require.ErrorIs(t, err, ErrNotRedeemable)

	f.rec.fail(nil)
	h, err = f.svc.Resolve(ctx, approve("h", "tok-alice"))
	require.NoError(t, err)
	require.Equal(t, engine.HoldApproved, h.Status)
}

func TestNewServiceRequiresParts(t *testing.T) {
	s := newTestStore(t)
	_, err := NewService(nil, DefaultConfig(), &recorder{}, &publisher{}, zerolog.Nop())
	require.Error(t, err)
	_, err = NewService(s, DefaultConfig(), nil, &publisher{}, zerolog.Nop())
	require.Error(t, err)
	_, err = NewService(s, Config{ResolutionPolicy: "{"}, &recorder{}, &publisher{}, zerolog.Nop())
	require.ErrorContains(t, err, "SVC_RESOLUTION_POLICY")
	_, err = NewService(s, Config{ResolverTokens: filepath.Join(t.TempDir(), "absent.json")}, &recorder{}, &publisher{}, zerolog.Nop())
	require.ErrorContains(t, err, "SVC_RESOLVER_TOKENS")
}

func identified(s *Service, token string) bool {
	_, ok, _ := s.Identify(token)
	return ok
}

// The hold a resolution answers with, and the record it commits, are what
// the store holds once it is applied, times truncated to the millisecond.
func TestResolvedHoldIsTheStoredOne(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, verifiedConfig(t))
	mustCreate(t, f.store, newHold("h", t0))
	now := t0.Add(time.Minute + 123456789*time.Nanosecond)
	req := approve("h", "tok-alice")
	req.Now = now

	h, err := f.svc.Resolve(ctx, req)
	require.NoError(t, err)
	stored, err := f.store.Get(ctx, "h", now)
	require.NoError(t, err)
	require.Equal(t, stored, h)
	_, recs := f.rec.snapshot()
	require.Equal(t, []engine.HoldEvent{holdEvent(engine.EventHoldResolution, stored, now, stored.ResolutionReason)}, recs)
}

// TestTokensFileMustBeARegularBoundedFile: a FIFO or a device named as
// SVC_RESOLVER_TOKENS is refused at once, never waited on or read without
// bound (the file is read on every resolution).
func TestTokensFileMustBeARegularBoundedFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "tokens.fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	big := filepath.Join(dir, "big.json")
	require.NoError(t, os.WriteFile(big, make([]byte, maxTokensFileBytes+1), 0o600))
	for path, want := range map[string]string{
		fifo:        "is not a regular file",
		"/dev/zero": "is not a regular file",
		big:         "is larger than",
	} {
		done := make(chan error, 1)
		go func() { _, err := loadTokens(path); done <- err }()
		select {
		case err := <-done:
			assert.ErrorContains(t, err, want, path)
		case <-time.After(5 * time.Second):
			t.Fatalf("loading %s hangs", path)
		}
	}
}
