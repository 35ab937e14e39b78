package cmd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/svc-dev/svc/database"
	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/api"
	"github.com/svc-dev/svc/export"
	"github.com/svc-dev/svc/holds"
	"github.com/svc-dev/svc/inbox"
	"github.com/svc-dev/svc/ledger"
	"github.com/svc-dev/svc/rego"
)

// app is a running engine's parts, closed in reverse order of opening.
type app struct {
	cfg      Config
	log      zerolog.Logger
	handler  http.Handler
	endWaits func() // ends the long-polls of holds and the web app's event streams, at shutdown
	engine   *engine.Engine
	closers  []func() error
	cancel   context.CancelFunc
	bgCtx    context.Context // of the background work, ended by Close
	exporter *export.Exporter
	ready    []api.ReadyCheck // the checks of GET /readyz
}

// openApp builds every part of the engine and checks that OPA runs and the
// policy compiles; any failure stops start-up with a clear message.
func openApp(ctx context.Context, cfg Config, log zerolog.Logger) (*app, error) {
	a := &app{cfg: cfg, log: log}
	if err := a.open(ctx); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

func (a *app) open(ctx context.Context) error {
	cfg, log := a.cfg, a.log
	if cfg.DatabaseURL == "" { // PostgreSQL orders its writers itself
		if err := a.lockDatabase(ctx, cfg.HoldsPath); err != nil {
			return err
		}
	}
	policyDir, err := a.policyDir()
	if err != nil {
		return err
	}
	eval, err := a.newEvaluator(ctx, policyDir)
	if err != nil {
		return err
	}
	if err := a.openExport(); err != nil {
		return err
	}
	if err := checkFreshDatabase(cfg); err != nil {
		return err
	}
	db, err := a.openDB(ctx)
	if err != nil {
		return err
	}
	a.closers = append(a.closers, db.Close)
	logState(log, cfg, db.Path())
	budgets, err := ledger.NewBudgets(ctx, db)
	if err != nil {
		return err
	}
	store, err := holds.NewStore(ctx, db.SQL())
	if err != nil {
		return err
	}
	audit, err := ledger.NewAudit(ctx, db, cfg.AuditLog, store, log)
	if err != nil {
		return err
	}
	a.closers = append(a.closers, audit.Close)
	if err := audit.Writable(); err != nil {
		return fmt.Errorf("audit log (SVC_AUDIT_LOG=%q): %w", cfg.AuditLog, err)
	}
	// The web app hears the hold events (to refresh its lists) beside the
	// export queues.
	events := inbox.NewEvents()
	pub := fanout{a.exporter, events}
	resolver, err := holds.NewService(store, cfg.holdsConfig(), audit, pub, log)
	if err != nil {
		return fmt.Errorf("hold resolution settings: %w", err)
	}
	observer, metricsHandler := newMetrics(store, a.exporter, eval)
	a.engine, err = engine.New(engine.Config{Version: Version, Window: cfg.Window, HoldTTL: cfg.HoldTTL, Deadline: cfg.OPATimeout,
		Terminal: resolver.Terminal, Approvers: resolver.Approvers, HoldLink: holdLink(cfg)},
		engine.Deps{Evaluator: eval, Budgets: budgets, Holds: store, Recorder: audit,
			Publisher: pub, Observer: observer, Logger: log, Subjects: subjectLocker(db)})
	if err != nil {
		return err
	}
	freeze, err := ledger.NewFreeze(ctx, db)
	if err != nil {
		return err
	}
	kill, err := engine.NewKillSwitch(ctx, a.engine, freeze, cfg.Freeze)
	if err != nil {
		return err
	}
	a.addReady("evaluator", eval.Check)
	a.addReady("database", db.Writable)
	a.addReady("audit_log", func(context.Context) error { return audit.Writable() })
	if p, ok := eval.(packStatuser); ok {
		a.addReady("policy_pack", func(context.Context) error { return packFresh(p) })
	}
	deps := api.ServerDeps{Engine: a.engine, Holds: store, Resolver: resolver, KillSwitch: kill,
		Health: a.health, Ready: a.ready, Routes: map[string]http.Handler{"GET /metrics": metricsHandler}, Logger: log}
	var srv *api.Server // made below; the web app wakes its long-polls
	if cfg.UIEnabled {
		ui, err := inbox.New(inbox.Config{PublicURL: cfg.PublicURL, AuthToken: cfg.AuthToken, Window: cfg.Window,
			MaxStreams: share(cfg.MaxConns, 4)},
			inbox.Deps{Holds: store, Resolver: resolver, Budgets: budgets, Events: events, Logger: log,
				Resolved: func(id string) { srv.HoldResolved(id) }})
		if err != nil {
			return err
		}
		deps.UI = ui
	}
	if cfg.Gate.Enabled() {
		gate, err := api.NewIntrospector(cfg.Gate)
		if err != nil {
			return err
		}
		a.closers = append(a.closers, gate.Close)
		deps.Gatekeeper = gate
	}
	srv = api.NewServer(api.ServerConfig{AuthToken: cfg.AuthToken, MaxBodyBytes: cfg.MaxBodyBytes,
		BodyTimeout: cfg.ReadTimeout, MaxHoldWaiters: share(cfg.MaxConns, 2)}, deps)
	a.handler = srv.Handler()
	a.endWaits = func() {
		srv.EndHoldWaits()
		events.Close()
	}
	a.background(ctx, resolver, budgets)
	reopenOnHUP(a.bgCtx, audit, log)
	go retain(a.bgCtx, cfg.Retention, log, "audit mirror and settled holds", pruneEngine(db))
	if db.Postgres() {
		a.follow(kill, srv)
	}
	return nil
}

// fanout hands each event to every publisher in turn.
type fanout []engine.Publisher

// Publish implements engine.Publisher.
func (f fanout) Publish(ev engine.Event) {
	for _, p := range f {
		p.Publish(ev)
	}
}

// holdLink returns the web page of a hold under SVC_PUBLIC_URL, nil when
// it is unset or the web app is off (there is no page to link to).
func holdLink(cfg Config) func(id string) string {
	if cfg.PublicURL == "" || !cfg.UIEnabled {
		return nil
	}
	return func(id string) string { return inbox.HoldURL(cfg.PublicURL, id) }
}

// openDB opens the PostgreSQL database of SVC_DATABASE_URL, with every
// statement bounded by the decision deadline (SVC_OPA_TIMEOUT), or else
// the SQLite file of SVC_HOLDS_PATH.
func (a *app) openDB(ctx context.Context) (*ledger.DB, error) {
	cfg := a.cfg
	if cfg.DatabaseURL == "" {
		db, err := ledger.Open(ctx, cfg.HoldsPath, cfg.Durability)
		if err != nil {
			return nil, fmt.Errorf("open database (SVC_HOLDS_PATH=%q): %w", cfg.HoldsPath, err)
		}
		return db, nil
	}
	db, err := ledger.OpenPostgres(ctx, cfg.DatabaseURL, cfg.Durability, cfg.OPATimeout)
	if err != nil {
		return nil, fmt.Errorf("open database (SVC_DATABASE_URL): %w", err)
	}
	return db, nil
}

// subjectLocker is the cross-replica lock of budget subjects of a shared
// (PostgreSQL) database; nil for SQLite, where this engine is the only
// writer.
func subjectLocker(db *ledger.DB) engine.SubjectLocker {
	if !db.Postgres() {
		return nil
	}
	return db
}

// packStatuser is an evaluator that can tell that the pack it decides with
// is stale: opa run --server kept the last pack that loaded after an edit
// failed to load (opa.OPAServer.PackStatus).
type packStatuser interface {
	PackStatus() (stale bool, err error)
}

// packFresh is the policy_pack readiness check: failing, with opa's load
// error, while the pack in force is not the one on disk.
func packFresh(p packStatuser) error {
	if stale, err := p.PackStatus(); stale {
		return fmt.Errorf("stale: the last edit of the pack failed to load, the previous pack decides: %w", err)
	}
	return nil
}

// addReady adds a named check to GET /readyz: one line per part whose
// readiness the engine reports (docs/api.md#readyz).
func (a *app) addReady(name string, check func(context.Context) error) {
	a.ready = append(a.ready, api.ReadyCheck{Name: name, Check: check})
}

// policyDir returns SVC_POLICY_DIR or the bundled pack written to a private
// temporary directory.
func (a *app) policyDir() (string, error) {
	if a.cfg.PolicyDir != "" {
		return a.cfg.PolicyDir, nil
	}
	dir, cleanup, err := rego.Materialize()
	if err != nil {
		return "", fmt.Errorf("write bundled policy pack: %w", err)
	}
	a.closers = append(a.closers, cleanup)
	return dir, nil
}

// FreezeCheckInterval is how often a replica on PostgreSQL re-reads the
// freeze state, besides waking on its notification: the bound of how long a
// freeze set through another replica takes to apply here when the
// notification is lost (docs/deploy.md).
const FreezeCheckInterval = 2 * time.Second

// follow keeps a replica on PostgreSQL in step with the others: it wakes
// the long-polls of holds that another replica resolves and applies the
// freeze state another replica sets, on their notifications (LISTEN) and,
// for the freeze, every FreezeCheckInterval.
func (a *app) follow(kill *engine.KillSwitch, srv *api.Server) {
	ctx := a.bgCtx
	freeze := make(chan struct{}, 1)
	poke := func() {
		select {
		case freeze <- struct{}{}:
		default:
		}
	}
	go database.Listen(ctx, a.cfg.DatabaseURL, []string{holds.HoldsChannel, ledger.FreezeChannel},
		func(channel, payload string) {
			if channel == holds.HoldsChannel {
				srv.HoldResolved(payload)
				return
			}
			poke()
		}, func(err error) {
			a.log.Warn().Err(err).Msg("notifications from other replicas lost; reconnecting")
		})
	go func() {
		t := time.NewTicker(FreezeCheckInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-freeze:
			}
			if err := kill.Sync(ctx); err != nil && ctx.Err() == nil {
				a.log.Warn().Err(err).Msg("freeze state of the other replicas unreadable")
			}
		}
	}()
}

// background starts the hold expiry sweep and the ledger pruning.
func (a *app) background(ctx context.Context, resolver *holds.Service, budgets *ledger.Budgets) {
	ctx, a.cancel = context.WithCancel(ctx)
	a.bgCtx = ctx
	go func() {
		if err := resolver.Run(ctx, 5*time.Second); err != nil && ctx.Err() == nil {
			a.log.Error().Err(err).Msg("hold expiry sweep stopped")
		}
	}()
	go func() {
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				if _, err := budgets.Prune(ctx, now.Add(-a.cfg.Window)); err != nil && ctx.Err() == nil {
					a.log.Warn().Err(err).Msg("prune session ledger")
				}
			}
		}
	}()
}

// openExport starts the syslog and webhook queues; the last thing closed,
// after the lifecycle "stop" event.
func (a *app) openExport() error {
	ex, err := export.New(a.cfg.Export, a.log)
	if err != nil {
		return err
	}
	a.exporter = ex
	a.closers = append(a.closers, func() error {
		a.lifecycle("stop")
		return ex.Close()
	})
	return nil
}

func (a *app) lifecycle(action string) {
	now := time.Now()
	a.exporter.Publish(engine.Event{Type: engine.EventLifecycle, Body: engine.LifecycleEvent{
		TS: engine.FormatTime(now), Event: engine.EventLifecycle, Action: action, SvcVersion: Version,
		EpochMS: now.UnixMilli(),
	}})
}

// health is the /healthz body beyond {status: ok}.
func (a *app) health() map[string]any {
	return map[string]any{"version": Version, "frozen": a.engine.Frozen(), "export": a.exporter.Stats()}
}

func (a *app) started(addr string, conns int) {
	a.lifecycle("start")
	a.log.Info().Str("addr", addr).Int("max_connections", conns).Str("version", Version).Str("durability", string(a.cfg.Durability)).Bool("frozen", a.engine.Frozen()).Msg("svc serving")
}

// Close stops background work and closes every part; it is idempotent.
func (a *app) Close() {
	if a.cancel != nil {
		a.cancel()
	}
	for i := len(a.closers) - 1; i >= 0; i-- {
		if err := a.closers[i](); err != nil && !errors.Is(err, context.Canceled) {
			a.log.Error().Err(err).Msg("close")
		}
	}
	a.closers = nil
}

// share is 1/part of conns connections, at least one (0: unbounded, when
// conns is): the most hold long-polls (a half) and web event streams (a
// quarter) open at once, so that they leave connections to decisions.
func share(conns, part int) int {
	if conns <= 0 {
		return 0
	}
	return max(1, conns/part)
}
