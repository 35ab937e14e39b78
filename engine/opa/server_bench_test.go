package opa

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/rego"
)

// benchEvaluate times one decision per iteration and reports the median and
// 99th percentile besides the mean, and the CPU this process (svc's side:
// not the opa server, a separate process) used per decision.
func benchEvaluate(b *testing.B, ev engine.Evaluator) {
	input := opaInput(withPrior(3, 0, 10, false, withAction("delete", "dev", "reversible", "single", "internal", 1)))
	times := make([]time.Duration, 0, b.N)
	cpu := processCPU(b)
	for b.Loop() {
		start := time.Now()
		v, err := ev.Evaluate(b.Context(), input)
		times = append(times, time.Since(start))
		if err != nil || v.Rule != "svc.policy/default_allow" {
			b.Fatalf("verdict %+v, error %v", v, err)
		}
	}
	b.ReportMetric(float64((processCPU(b)-cpu).Microseconds())/float64(len(times)), "svc-cpu-µs/op")
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

// processCPU is the user and system CPU this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkServerEvaluate: one decision through the supervised opa server.
// Run with -benchtime=1000x for the p50 over 1000 calls. The sub-benchmark
// transport=net-http queries the server through net/http's Transport, as
// svc did before its own (syncTransport), for comparison.
func BenchmarkServerEvaluate(b *testing.B) {
	bin, dir := benchPack(b)
	s, err := StartOPAServer(OPAServerConfig{Bin: bin, PolicyDir: dir, Timeout: 10 * time.Second, Logger: zerolog.Nop()})
	require.NoError(b, err)
	b.Cleanup(func() { _ = s.Close() })
	require.NoError(b, s.Check(b.Context()))
	b.Run("transport=sync", func(b *testing.B) { benchEvaluate(b, s) })
	b.Run("transport=net-http", func(b *testing.B) {
		d := &net.Dialer{}
		rest := newRESTEvaluator(&url.URL{Scheme: "http", Host: "opa"}, &http.Transport{
			DialContext:  func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx, "unix", s.sock) },
			MaxIdleConns: opaIdleConns, MaxIdleConnsPerHost: opaIdleConns, DisableCompression: true,
		}, 10*time.Second)
		defer rest.Close()
		benchEvaluate(b, rest)
	})
}

// BenchmarkEvalEvaluate: one decision through one `opa eval` run.
func BenchmarkEvalEvaluate(b *testing.B) {
	bin, dir := benchPack(b)
	benchEvaluate(b, NewEvalEvaluator(bin, dir, 10*time.Second))
}
