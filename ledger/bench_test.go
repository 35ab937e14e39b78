package ledger_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/svc-dev/svc/engine"
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
