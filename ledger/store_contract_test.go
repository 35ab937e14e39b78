package ledger_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/database/pgtest"
	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/envelope"
	"github.com/svc-dev/svc/holds"
	"github.com/svc-dev/svc/ledger"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// replica is one engine's view of the store: its database handle, budgets,
// hold store, audit log and freeze store.
type replica struct {
	db      *ledger.DB
	budgets *ledger.Budgets
	holds   *holds.Store
	audit   *ledger.Audit
	freeze  *ledger.Freeze
}

// storeKind opens replicas of one store: every replica of a kind shares
// its database (SQLite: one file; PostgreSQL: one server database).
type storeKind struct {
	name string
	open func(t *testing.T) func(t *testing.T) replica
}

func storeKinds() []storeKind {
	return []storeKind{
		{"sqlite", func(t *testing.T) func(t *testing.T) replica {
			path := filepath.Join(t.TempDir(), "svc.db")
			return func(t *testing.T) replica {
				db, err := ledger.Open(context.Background(), path, ledger.DurabilityFull)
				require.NoError(t, err)
				return newReplica(t, db)
			}
		}},
		{"postgres", func(t *testing.T) func(t *testing.T) replica {
			url := pgtest.URL(t)
			return func(t *testing.T) replica {
				db, err := ledger.OpenPostgres(context.Background(), url, ledger.DurabilityFull, 5*time.Second)
				require.NoError(t, err)
				return newReplica(t, db)
			}
		}},
	}
}

func newReplica(t *testing.T, db *ledger.DB) replica {
	ctx := context.Background()
	r := replica{db: db}
	var err error
	r.budgets, err = ledger.NewBudgets(ctx, db)
	require.NoError(t, err)
	r.holds, err = holds.NewStore(ctx, db.SQL())
	require.NoError(t, err)
	r.audit, err = ledger.NewAudit(ctx, db, filepath.Join(t.TempDir(), "audit.jsonl"), r.holds,
		zerolog.New(zerolog.NewTestWriter(t)))
	require.NoError(t, err)
	r.freeze, err = ledger.NewFreeze(ctx, db)
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, r.audit.Close())
		assert.NoError(t, db.Close())
	})
	return r
}

func contractHold(id string, now time.Time) engine.Hold {
	gate := ""
	return engine.Hold{ID: id, Gate: &gate, DecisionID: "d-" + id, Rule: "svc.policy/irreversible_broad_prod", Reason: "r",
		Envelope:     &envelope.Envelope{Agent: envelope.Agent{ID: "agent-1", SessionID: "s-" + id}},
		EnvelopeHash: "eh-" + id, ParamsHash: "ph-" + id, CreatedTS: now, ExpiresTS: now.Add(time.Hour)}
}

// The store contract, run against SQLite and PostgreSQL alike: what one
// replica writes, another reads, and the compare-and-sets hold.
func TestStoreContract(t *testing.T) {
	for _, kind := range storeKinds() {
		t.Run(kind.name, func(t *testing.T) {
			t.Run("charges are summed per subject on every replica", func(t *testing.T) {
				open := kind.open(t)
				a, b := open(t), open(t)
				ctx, now := context.Background(), time.Now()
				for i, r := range []replica{a, b, a} {
					c := engine.Charge{SessionID: "s1", AgentID: "agent-1", PrincipalID: "human:p", DecisionID: "d" + string(rune('0'+i)),
						At: now, Totals: engine.Totals{Deletes: 2, Objects: 3}, Currency: "EUR", Amount: 10000}
					require.NoError(t, r.audit.Commit(ctx, engine.Entry{Records: decisionRecords(c.DecisionID), Charge: &c}))
				}
				for _, r := range []replica{a, b} {
					for _, sc := range []struct {
						scope engine.Scope
						id    string
					}{{engine.ScopeSession, "s1"}, {engine.ScopeAgent, "agent-1"}, {engine.ScopePrincipal, "human:p"}} {
						u, err := r.budgets.Usage(ctx, sc.scope, sc.id, now.Add(-time.Minute))
						require.NoError(t, err)
						assert.Equal(t, engine.Totals{Deletes: 6, Objects: 9}, u.Totals, sc.scope)
						assert.Equal(t, engine.Amounts{"EUR": 30000}, u.Money, sc.scope)
					}
					u, err := r.budgets.Usage(ctx, engine.ScopeSession, "s1", now.Add(time.Minute))
					require.NoError(t, err)
					assert.Zero(t, u.Totals, "charges before the window are not counted")
				}
				n, err := b.budgets.Prune(ctx, now.Add(time.Minute))
				require.NoError(t, err)
				assert.EqualValues(t, 3, n)
			})
			t.Run("holds move across replicas and are spent once", func(t *testing.T) {
				open := kind.open(t)
				a, b := open(t), open(t)
				ctx, now := context.Background(), time.Now()
				h := contractHold("h1", now)
				require.NoError(t, a.audit.Commit(ctx, engine.Entry{Records: decisionRecords("c1"), Create: &h}))
				twin := contractHold("h2", now)
				twin.EnvelopeHash, twin.ParamsHash, twin.Envelope = h.EnvelopeHash, h.ParamsHash, h.Envelope
				err := b.audit.Commit(ctx, engine.Entry{Records: decisionRecords("c2"), Create: &twin})
				assert.ErrorIs(t, err, engine.ErrIdenticalHold, "an identical live hold is reused, not raised twice")
				got, err := b.holds.Get(ctx, "h1", now)
				require.NoError(t, err)
				assert.Equal(t, engine.HoldPending, got.Status)
				page, err := b.holds.List(ctx, engine.HoldQuery{Status: "pending", Limit: 10, Now: now})
				require.NoError(t, err)
				assert.Equal(t, 1, page.Count)
				reuse, err := b.holds.Reusable(ctx, engine.HoldBinding(&h), now)
				require.NoError(t, err)
				assert.Equal(t, "h1", reuse.ID)

				approve := engine.HoldResolution{HoldID: "h1", Status: engine.HoldApproved,
					By: engine.Principal{Type: holds.TypeHuman, ID: "bob"}, Verified: true, At: now}
				require.NoError(t, b.audit.Commit(ctx, engine.Entry{Records: decisionRecords("c3")[1:], Resolve: &approve}))
				assert.ErrorIs(t, a.audit.Commit(ctx, engine.Entry{Records: decisionRecords("c4")[1:], Resolve: &approve}),
					engine.ErrConflict, "a hold is resolved once")
				got, err = a.holds.Get(ctx, "h1", now)
				require.NoError(t, err)
				require.NotNil(t, got.DecidedByVerified)
				assert.True(t, *got.DecidedByVerified)

				var wins, conflicts int
				var mu sync.Mutex
				var wg sync.WaitGroup
				for i := range 20 {
					r := []replica{a, b}[i%2]
					wg.Add(1)
					go func() {
						defer wg.Done()
						id := "r" + string(rune('a'+i))
						err := r.audit.Commit(ctx, engine.Entry{Records: decisionRecords(id)[:1],
							Consume: &engine.Consumption{HoldID: "h1", DecisionID: id, At: time.Now()}})
						mu.Lock()
						defer mu.Unlock()
						switch {
						case err == nil:
							wins++
						case errors.Is(err, engine.ErrConflict):
							conflicts++
						default:
							t.Errorf("redeem: %v", err)
						}
					}()
				}
				wg.Wait()
				assert.Equal(t, 1, wins, "an approval is spent once across replicas")
				assert.Equal(t, 19, conflicts)

				late := contractHold("h3", now.Add(-2*time.Hour))
				late.ExpiresTS = now.Add(-time.Hour)
				require.NoError(t, a.audit.Commit(ctx, engine.Entry{Records: decisionRecords("c5"), Create: &late}))
				swept, err := b.holds.Sweep(ctx, now)
				require.NoError(t, err)
				require.Len(t, swept, 1)
				assert.Equal(t, "h3", swept[0].ID)
				counts, err := a.holds.CountByStatus(ctx, now)
				require.NoError(t, err)
				assert.Equal(t, map[string]int{"consumed": 1, "expired": 1}, counts)
			})
			t.Run("freeze state is shared", func(t *testing.T) {
				open := kind.open(t)
				a, b := open(t), open(t)
				ctx := context.Background()
				st, err := b.freeze.LoadFreeze(ctx)
				require.NoError(t, err)
				assert.Equal(t, engine.FreezeState{}, st)
				want := engine.FreezeState{Frozen: true, Reason: "incident", By: "human:bob",
					UpdatedTS: time.UnixMilli(time.Now().UnixMilli()).UTC(), FromPin: true}
				require.NoError(t, a.freeze.SaveFreeze(ctx, want))
				st, err = b.freeze.LoadFreeze(ctx)
				require.NoError(t, err)
				assert.Equal(t, want, st)
			})
		})
	}
}

// Replicas starting together on a new PostgreSQL database migrate it one
// at a time (an advisory lock), even with a decision deadline far shorter
// than the wait for that lock.
func TestPostgresReplicasMigrateTogether(t *testing.T) {
	url := pgtest.URL(t)
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			db, err := ledger.OpenPostgres(ctx, url, ledger.DurabilityFull, 10*time.Millisecond)
			if err != nil {
				errs <- err
				return
			}
			defer func() { _ = db.Close() }()
			if _, err := holds.NewStore(ctx, db.SQL()); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
}
