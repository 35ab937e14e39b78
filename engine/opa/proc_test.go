package opa

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/svc-dev/svc/engine"
)

// warmEvaluator gives ev n spares, waits until each has been started (or
// failed to start) and closes ev when the test ends.
func warmEvaluator(t *testing.T, ev *EvalEvaluator, n int) *EvalEvaluator {
	t.Helper()
	ev.WithSpares(n)
	t.Cleanup(func() { assert.NoError(t, ev.Close()) })
	if ev.spares != nil {
		ev.spares.refill()
		ev.spares.adding.Wait()
	}
	return ev
}

// sparePIDs lists the pids of the spares waiting in ev's pool.
func sparePIDs(ev *EvalEvaluator) []int {
	ev.spares.mu.Lock()
	defer ev.spares.mu.Unlock()
	pids := make([]int, 0, len(ev.spares.ready))
	for _, p := range ev.spares.ready {
		pids = append(pids, p.cmd.Process.Pid)
	}
	return pids
}

const (
	allowA = "package svc.policy\n\ndecision := {\"decision\": \"allow\", \"rule\": \"svc.policy/a\", \"reason\": \"a\"}\n"
	denyB  = "package svc.policy\n\ndecision := {\"decision\": \"deny\", \"rule\": \"svc.policy/b\", \"reason\": \"b\"}\n"
)

// TestEvalSpareReadsPackAfterInput pins what makes spares safe: a spare
// started before the pack changed decides with the pack on disk when it
// gets its input, and a pack broken after it started is a fault. An opa
// that loaded the pack before reading its input would fail this test.
func TestEvalSpareReadsPackAfterInput(t *testing.T) {
	dir := writePolicy(t, allowA)
	ev := warmEvaluator(t, NewEvalEvaluator(opaTestBin(t), dir, 10*time.Second), 1)
	spare := sparePIDs(ev)
	require.Len(t, spare, 1)
	time.Sleep(300 * time.Millisecond) // past opa's start-up

	writeModule(t, dir, denyB)
	got, err := ev.Evaluate(t.Context(), opaInput(nil))
	require.NoError(t, err)
	assert.Equal(t, engine.Verdict{Decision: engine.Deny, Rule: "svc.policy/b", Reason: "b"}, got)
	assert.NotContains(t, sparePIDs(ev), spare[0], "the decision took the spare")

	ev.spares.adding.Wait()
	time.Sleep(300 * time.Millisecond)
	writeModule(t, dir, "package svc.policy\n\ndecision := if {\n")
	_, err = ev.Evaluate(t.Context(), opaInput(nil))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "rego_parse_error")
}

// TestEvalSpareReadsDataAfterInput: the same for the pack's data files
// (the bundled pack's limits and tables are in data.json).
func TestEvalSpareReadsDataAfterInput(t *testing.T) {
	dir := writePolicy(t, "package svc.policy\n\ndecision := {\"decision\": \"allow\", \"rule\": \"svc.policy/d\", \"reason\": data.svc.note}\n")
	writeData := func(note string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "data.json"), []byte(`{"svc": {"note": "`+note+`"}}`), 0o600))
	}
	writeData("before")
	ev := warmEvaluator(t, NewEvalEvaluator(opaTestBin(t), dir, 10*time.Second), 1)
	require.Len(t, sparePIDs(ev), 1)
	time.Sleep(300 * time.Millisecond) // past opa's start-up

	writeData("after")
	got, err := ev.Evaluate(t.Context(), opaInput(nil))
	require.NoError(t, err)
	assert.Equal(t, "after", got.Reason)
}

func writeModule(t *testing.T, dir, module string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.rego"), []byte(module), 0o600))
}

// TestEvalSpareDiedWhileWaiting: a spare killed while it waited is dropped
// and the decision runs a process of its own.
func TestEvalSpareDiedWhileWaiting(t *testing.T) {
	ev := warmEvaluator(t, NewEvalEvaluator(opaTestBin(t), writePolicy(t, allowA), 10*time.Second), 1)
	ev.spares.ready[0].kill()

	got, err := ev.Evaluate(t.Context(), opaInput(nil))
	require.NoError(t, err)
	assert.Equal(t, "svc.policy/a", got.Rule)
}

// TestEvalSparesClose: Close kills the waiting spares and starts no more;
// decisions after it still run, each with a process of its own.
func TestEvalSparesClose(t *testing.T) {
	ev := warmEvaluator(t, NewEvalEvaluator(opaTestBin(t), writePolicy(t, allowA), 10*time.Second), 2)
	pids := sparePIDs(ev)
	require.Len(t, pids, 2)

	require.NoError(t, ev.Close())
	for _, pid := range pids {
		assert.True(t, processGone(pid), "spare %d survived Close", pid)
	}
	got, err := ev.Evaluate(t.Context(), opaInput(nil))
	require.NoError(t, err)
	assert.Equal(t, "svc.policy/a", got.Rule)
	ev.spares.adding.Wait()
	assert.Empty(t, sparePIDs(ev), "no spare started after Close")
}

// TestEvalSparesConcurrent: concurrent decisions share two spares, each
// decided once by the real opa, and no process outlives Close.
func TestEvalSparesConcurrent(t *testing.T) {
	ev := warmEvaluator(t, NewEvalEvaluator(opaTestBin(t), writePolicy(t, allowA), 10*time.Second), 2)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			got, err := ev.Evaluate(t.Context(), opaInput(nil))
			if err == nil && got.Rule != "svc.policy/a" {
				err = assert.AnError
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		assert.NoError(t, err)
	}
	ev.spares.adding.Wait()
	pids := sparePIDs(ev)
	assert.Len(t, pids, 2, "the pool refilled")
	require.NoError(t, ev.Close())
	for _, pid := range pids {
		assert.True(t, processGone(pid), "spare %d survived Close", pid)
	}
}

// TestEvalGOGC: an opa eval, spare or not, runs with GOGC=opaGCPercent
// unless svc's environment sets GOGC; WithEnviron runs it with exactly the
// environment given (the benchmark's bare opa eval).
func TestEvalGOGC(t *testing.T) {
	for _, spares := range []int{0, 1} {
		for _, tt := range []struct {
			name, env string
			bare      bool
			want      string
		}{
			{"unset", "", false, "GOGC=" + opaGCPercent},
			{"set", "off", false, "GOGC=off"},
			{"bare", "", true, "GOGC=unset"},
		} {
			t.Run(fmt.Sprintf("%s with %d spares", tt.name, spares), func(t *testing.T) {
				t.Setenv("GOGC", tt.env)
				if tt.env == "" {
					require.NoError(t, os.Unsetenv("GOGC"))
				}
				ev := NewEvalEvaluator(fakeOPA(t, "gogc.sh"), t.TempDir(), 10*time.Second)
				if tt.bare {
					ev.WithEnviron(os.Environ())
				}
				got, err := warmEvaluator(t, ev, spares).Evaluate(t.Context(), opaInput(nil))
				require.NoError(t, err)
				assert.Equal(t, tt.want, got.Reason)
			})
		}
	}
}
