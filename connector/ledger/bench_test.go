package ledger_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/svc-dev/svc/connector"
	"github.com/svc-dev/svc/connector/ledger"
)

// BenchmarkRecord is the cost of recording one request's row in a SQLite
// ledger file, synced (SVC_DURABILITY=full) or not, with 1 and 16
// requests recording at once; cpu-µs/op is the process's CPU per row, the
// figure that holds still on a shared machine.
// Run: go test -run '^$' -bench Record ./connector/ledger
func BenchmarkRecord(b *testing.B) {
	for _, synced := range []bool{true, false} {
		for _, callers := range []int{1, 16} {
			b.Run(fmt.Sprintf("synced=%t/callers=%d", synced, callers), func(b *testing.B) {
				ctx := context.Background()
				l, err := ledger.Open(ctx, filepath.Join(b.TempDir(), "gw.db"), synced)
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				row := []connector.Row{benchRow("call_1")}
				cpu := cpuTime()
				b.ResetTimer()
				var wg sync.WaitGroup
				for w := range callers {
					wg.Go(func() {
						for i := w; i < b.N; i += callers {
							if err := l.Record(ctx, row); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
			})
		}
	}
}

// cpuTime is the CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
