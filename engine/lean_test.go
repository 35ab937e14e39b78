package engine_test

import (
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/opa"
	"github.com/svc-dev/svc/rego"
)

// The decision path leaves nothing behind it, in either OPA mode: after
// many concurrent decisions no goroutine is left over (a leak of one per
// decision would leave hundreds) and no file was created in the temporary
// directory (no policy or input file per request).
func TestDecisionPathLeavesNothingBehind(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	pack, cleanup, err := rego.Materialize()
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, cleanup()) })
	evaluators := map[string]func(t *testing.T) engine.Evaluator{
		"eval": func(*testing.T) engine.Evaluator { return opa.NewEvalEvaluator(realOPA(t), pack, 10*time.Second) },
		"server": func(t *testing.T) engine.Evaluator {
			s, err := opa.StartOPAServer(opa.OPAServerConfig{Bin: realOPA(t), PolicyDir: pack,
				Timeout: 10 * time.Second, Logger: zerolog.Nop()})
			require.NoError(t, err)
			t.Cleanup(func() { assert.NoError(t, s.Close()) })
			require.NoError(t, s.Check(t.Context()))
			return s
		},
	}
	for mode, evaluator := range evaluators {
		t.Run(mode, func(t *testing.T) {
			p := newPipelineWith(t, evaluator(t), nil)
			// Warm up at full concurrency: prepared statements, and the
			// keep-alive connections to the opa server, which stay open
			// (two goroutines each) and are no leak.
			leanBurst(t, p, "warm")
			goroutines := runtime.NumGoroutine()
			files := dirEntries(t, tmp)

			decisions := leanBurst(t, p, "lean")
			require.Eventually(t, func() bool { return runtime.NumGoroutine() <= goroutines+6 }, 5*time.Second,
				10*time.Millisecond, "goroutines: %d before %d decisions", goroutines, decisions)
			assert.Equal(t, files, dirEntries(t, tmp), "files created in the temporary directory")
		})
	}
}

// leanBurst makes 96 decisions from 8 concurrent callers, sessions named
// after tag, none of which may be denied, and returns their number.
func leanBurst(t *testing.T, p *pipeline, tag string) int {
	t.Helper()
	const workers, each = 8, 12
	var wg sync.WaitGroup
	decisions := make(chan engine.Decision, workers*each)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				verb := []string{"read", "update", "delete"}[i%3]
				decisions <- p.decide(t, tag+"-"+string(rune('a'+w)), verb, 1)
			}
		})
	}
	wg.Wait()
	close(decisions)
	for d := range decisions {
		assert.NotEqual(t, engine.Deny, d.Decision, "%+v", d)
	}
	return workers * each
}

func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names
}
