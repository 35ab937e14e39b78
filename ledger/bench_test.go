package ledger_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/ledger"
)

// BenchmarkAuditRecordParallel measures audit throughput with many
// concurrent callers, as under load, and with a lone caller, whose every
// record is its own batch.
//
//	go test -run '^$' -bench AuditRecordParallel ./ledger
func BenchmarkAuditRecordParallel(b *testing.B) {
	for _, bc := range []struct {
		name    string
		jsonl   bool
		callers int // per GOMAXPROCS; 0 means one caller in all
	}{
		{"jsonl+mirror/callers=1", true, 0},
		{"jsonl+mirror/callers=64xGOMAXPROCS", true, 64},
		{"mirror/callers=64xGOMAXPROCS", false, 64},
	} {
		b.Run(bc.name, func(b *testing.B) {
			path := ""
			if bc.jsonl {
				path = filepath.Join(b.TempDir(), "audit.jsonl")
			}
			a := newAudit(b, openDB(b), path)
			ev := decision("0123456789abcdef0123456789abcdef")
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			if bc.callers == 0 {
				for b.Loop() {
					if err := a.Record(ctx, engine.EventDecision, ev); err != nil {
						b.Fatal(err)
					}
				}
			} else {
				b.SetParallelism(bc.callers)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := a.Record(ctx, engine.EventDecision, ev); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkDecisionCommit measures what an allow costs the ledger: its
// audit record and its charge in one Commit (one transaction, shared by
// concurrent callers).
//
//	go test -run '^$' -bench DecisionCommit ./ledger
func BenchmarkDecisionCommit(b *testing.B) {
	for _, bc := range []struct {
		name    string
		callers int // per GOMAXPROCS; 0 means one caller in all
	}{
		{"callers=1", 0},
		{"callers=8xGOMAXPROCS", 8},
	} {
		b.Run(bc.name, func(b *testing.B) {
			db := openDB(b)
			a := newAudit(b, db, filepath.Join(b.TempDir(), "audit.jsonl"))
			var seq atomic.Int64
			commit := func() error {
				n := seq.Add(1)
				c := engine.Charge{SessionID: fmt.Sprintf("s-%d", n%100), DecisionID: fmt.Sprint(n),
					At: time.Now(), Totals: engine.Totals{Objects: 1}}
				return a.Commit(context.Background(), engine.Entry{Records: []engine.AuditRecord{{Kind: engine.EventDecision, Body: decision(c.DecisionID)}}, Charge: &c})
			}
			runCallers(b, bc.callers, commit)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
		})
	}
}

// runCallers runs fn b.N times from one caller, or from callers goroutines
// per GOMAXPROCS.
func runCallers(b *testing.B, callers int, fn func() error) {
	b.ReportAllocs()
	b.ResetTimer()
	if callers == 0 {
		for b.Loop() {
			if err := fn(); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	b.SetParallelism(callers)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := fn(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkTotals measures the budget read of every decision, for a
// session with 500 charges in its window.
//
//	go test -run '^$' -bench Totals ./ledger
func BenchmarkTotals(b *testing.B) {
	ctx := context.Background()
	db := openDB(b)
	budgets, err := ledger.NewBudgets(ctx, db)
	if err != nil {
		b.Fatal(err)
	}
	a := newAudit(b, db, "")
	now := time.Now()
	for i := range 500 {
		c := engine.Charge{SessionID: "s", DecisionID: fmt.Sprint(i), At: now.Add(-time.Duration(i) * time.Second),
			Totals: engine.Totals{Deletes: 1, Objects: 2}}
		if err := a.Commit(ctx, engine.Entry{Records: []engine.AuditRecord{{Kind: engine.EventDecision, Body: decision(c.DecisionID)}}, Charge: &c}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := budgets.Totals(ctx, "s", now.Add(-time.Hour)); err != nil {
			b.Fatal(err)
		}
	}
}
