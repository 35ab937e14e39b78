package engine

import (
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/rego"
)

// benchEvaluate times one decision per iteration and reports the median and
// 99th percentile besides the mean.
func benchEvaluate(b *testing.B, ev Evaluator) {
	input := opaInput(withPrior(3, 0, 10, false, withAction("delete", "dev", "reversible", "single", "internal", 1)))
	times := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		v, err := ev.Evaluate(b.Context(), input)
		times = append(times, time.Since(start))
		if err != nil || v.Rule != "svc.policy/default_allow" {
			b.Fatalf("verdict %+v, error %v", v, err)
		}
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(times[len(times)*99/100].Microseconds()), "p99-µs")
}

func benchPack(b *testing.B) (string, string) {
	bin, err := exec.LookPath("opa")
	require.NoError(b, err)
	dir, cleanup, err := rego.Materialize()
	require.NoError(b, err)
	b.Cleanup(func() { _ = cleanup() })
	return bin, dir
}

// BenchmarkServerEvaluate: one decision through the supervised opa server.
// Run with -benchtime=1000x for the p50 over 1000 calls.
func BenchmarkServerEvaluate(b *testing.B) {
	bin, dir := benchPack(b)
	s, err := StartOPAServer(OPAServerConfig{Bin: bin, PolicyDir: dir, Timeout: 10 * time.Second, Logger: zerolog.Nop()})
	require.NoError(b, err)
	b.Cleanup(func() { _ = s.Close() })
	require.NoError(b, s.Check(b.Context()))
	benchEvaluate(b, s)
}

// BenchmarkEvalEvaluate: one decision through one `opa eval` run.
func BenchmarkEvalEvaluate(b *testing.B) {
	bin, dir := benchPack(b)
	benchEvaluate(b, NewEvalEvaluator(bin, dir, 10*time.Second))
}
