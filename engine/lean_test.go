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
		"eval": func(*testing.T) engine.Evaluator { return engine.NewEvalEvaluator(realOPA(t), pack, 10*time.Second) },
		"server": func(t *testing.T) engine.Evaluator {
			s, err := engine.StartOPAServer(engine.OPAServerConfig{Bin: realOPA(t), PolicyDir: pack,
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
			for range 4 { // warm up: connections, prepared statements
				require.Equal(t, engine.Allow, p.decide(t, "warm", "read", 1).Decision)
			}
			goroutines := runtime.NumGoroutine()
			files := dirEntries(t, tmp)

			const workers, each = 8, 12
			var wg sync.WaitGroup
			decisions := make(chan engine.Decision, workers*each)
			for w := range workers {
				wg.Go(func() {
					for i := range each {
						verb := []string{"read", "update", "delete"}[i%3]
						decisions <- p.decide(t, "lean-"+string(rune('a'+w)), verb, 1)
					}
				})
			}
			wg.Wait()
			close(decisions)
			for d := range decisions {
				assert.NotEqual(t, engine.Deny, d.Decision, "%+v", d)
			}

			require.Eventually(t, func() bool { return runtime.NumGoroutine() <= goroutines+4 }, 5*time.Second,
				10*time.Millisecond, "goroutines: %d before, %d after %d decisions",
				goroutines, runtime.NumGoroutine(), workers*each)
			assert.Equal(t, files, dirEntries(t, tmp), "files created in the temporary directory")
		})
	}
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
