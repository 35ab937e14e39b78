package opa

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/envelope"
	"github.com/svc-dev/svc/rego"
)

// opaTestBin is the real opa the tests run: $SVC_OPA_BIN or opa on PATH.
func opaTestBin(t *testing.T) string {
	t.Helper()
	name := os.Getenv("SVC_OPA_BIN")
	if name == "" {
		name = "opa"
	}
	bin, err := exec.LookPath(name)
	require.NoError(t, err, "opa binary not found; run scripts/install-opa")
	return bin
}

// bundledPack materializes the bundled policy pack for one test.
func bundledPack(t *testing.T) string {
	t.Helper()
	dir, cleanup, err := rego.Materialize()
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, cleanup()) })
	return dir
}

func fakeOPA(t *testing.T, name string) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("testdata", "fakeopa", name))
	require.NoError(t, err)
	return path
}

// opaInput is a policy input that matches no restricting rule: an update in
// production of one object, reversible, single, internal.
func opaInput(edit func(in *engine.PolicyInput)) json.RawMessage {
	in := probeInput()
	in.Envelope.Action.Verb = "update"
	in.Envelope.Target.Environment = "production"
	if edit != nil {
		edit(&in)
	}
	b, err := json.Marshal(in)
	if err != nil {
		panic(err)
	}
	return b
}

func withAction(verb, env, rev, radius, ext string, count int64) func(*engine.PolicyInput) {
	return func(in *engine.PolicyInput) {
		in.Envelope.Action.Verb = verb
		in.Envelope.Target.Environment = env
		in.Envelope.Axes = envelope.Axes{Reversibility: rev, BlastRadius: radius, Externality: ext}
		in.Envelope.Magnitude.Count = count
	}
}

func withPrior(deletes, sends, objects int64, frozen bool, act func(*engine.PolicyInput)) func(*engine.PolicyInput) {
	return func(in *engine.PolicyInput) {
		act(in)
		in.Cumulative.Totals = engine.Totals{Deletes: deletes, ExternalSends: sends, Objects: objects}
		in.Frozen = frozen
	}
}

func TestEvalEvaluatorBundledPolicy(t *testing.T) {
	// Two spares for the parallel cases: some decide through a spare, some
	// through a process of their own.
	ev := NewEvalEvaluator(opaTestBin(t), bundledPack(t), 10*time.Second).WithSpares(2)
	t.Cleanup(func() { assert.NoError(t, ev.Close()) })
	tests := []struct {
		name   string
		input  func(*engine.PolicyInput)
		want   engine.Verdict
		reason string // checked when set
	}{
		{"default allow", nil, engine.Verdict{Decision: engine.Allow, Rule: "svc.policy/default_allow"}, ""},
		{"read only internal", withAction("read", "production", "reversible", "single", "internal", 1),
			engine.Verdict{Decision: engine.Allow, Rule: "svc.policy/read_only_internal"}, ""},
		{"frozen delete", withPrior(0, 0, 0, true, withAction("delete", "dev", "reversible", "single", "internal", 1)),
			engine.Verdict{Decision: engine.Deny, Rule: RuleFrozen}, ""},
		{"frozen read", withPrior(0, 0, 0, true, withAction("read", "dev", "reversible", "single", "internal", 1)),
			engine.Verdict{Decision: engine.Allow, Rule: "svc.policy/read_only_internal"}, ""},
		{"irreversible systemic prod", withAction("delete", "production", "irreversible", "systemic", "internal", 1),
			engine.Verdict{Decision: engine.Deny, Rule: "svc.policy/irreversible_systemic_prod"}, ""},
		{"irreversible broad prod", withAction("delete", "production", "irreversible", "broad", "internal", 1),
			engine.Verdict{Decision: engine.RequireApproval, Rule: "svc.policy/irreversible_broad_prod"}, ""},
		{"irreversible broad staging", withAction("delete", "staging", "irreversible", "broad", "internal", 1),
			engine.Verdict{Decision: engine.Allow, Rule: "svc.policy/default_allow"}, ""},
		{"delete budget at limit", withPrior(15, 0, 0, false, withAction("delete", "dev", "reversible", "single", "internal", 5)),
			engine.Verdict{Decision: engine.Allow, Rule: "svc.policy/default_allow"}, ""},
		{"delete budget exceeded", withPrior(18, 0, 0, false, withAction("delete", "dev", "reversible", "single", "internal", 5)),
			engine.Verdict{Decision: engine.RequireApproval, Rule: "svc.policy/session_delete_budget"},
			"session delete budget exceeded: 18 prior + 5 requested > limit 20"},
		{"external sends exceeded", withPrior(0, 45, 0, false, withAction("emit", "dev", "reversible", "single", "outbound", 10)),
			engine.Verdict{Decision: engine.RequireApproval, Rule: "svc.policy/cumulative_budget"},
			"session external send budget exceeded: 45 prior + 10 requested > limit 50"},
		{"objects exceeded", withPrior(0, 0, 195, false, withAction("update", "dev", "reversible", "single", "internal", 10)),
			engine.Verdict{Decision: engine.RequireApproval, Rule: "svc.policy/cumulative_budget"},
			"session object budget exceeded: 195 prior + 10 requested > limit 200"},
		{"non-canonical verb", withAction("drop", "dev", "reversible", "single", "internal", 1),
			engine.Verdict{Decision: engine.Deny, Rule: "svc.policy/invalid_input"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ev.Evaluate(t.Context(), opaInput(tt.input))
			require.NoError(t, err)
			assert.True(t, got.Valid())
			assert.Equal(t, tt.want.Decision, got.Decision)
			assert.Equal(t, tt.want.Rule, got.Rule)
			assert.NotEmpty(t, got.Reason)
			if tt.reason != "" {
				assert.Equal(t, tt.reason, got.Reason)
			}
		})
	}
}

// processGone reports whether pid has exited (absent, or a zombie awaiting
// its reaper).
func processGone(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// The state follows the parenthesised command name.
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(fields) > 0 && (fields[0] == "Z" || fields[0] == "X")
}

func TestEvalEvaluatorFaults(t *testing.T) {
	// Long enough for a fake to print its 2 MB on a loaded machine under
	// -race, which at 500 ms sometimes timed out first.
	const timeout = 2 * time.Second
	tests := []struct {
		name      string
		bin       string
		want      string
		childPID  bool // the fake leaves a child whose death proves the group was killed
		maxErrLen int  // checked when set
	}{
		{"sleeps past timeout", "sleep.sh", "timed out after 2s", true, 0},
		{"prints garbage", "garbage.sh", "parse opa output", false, 0},
		{"exits non-zero", "fail.sh", "exit status 3: rego_parse_error: unexpected token", false, 0},
		{"undefined result", "undefined.sh", "policy decision is undefined", false, 0},
		{"unknown decision", "unknown-decision.sh", `decision "maybe"`, false, 0},
		{"floods stdout", "flood.sh", "printed more than", false, 0},
		{"echoes large input", "echo-stdin.sh", "exit status 1", false, 1024},
		{"missing binary", "no-such-opa", "run opa", false, 0},
	}
	big := opaInput(func(in *engine.PolicyInput) {
		in.Envelope.Params = map[string]any{"blob": strings.Repeat("secret-", 2000)}
	})
	for _, spares := range []int{0, 1} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s with %d spares", tt.name, spares), func(t *testing.T) {
				pidFile := filepath.Join(t.TempDir(), "child.pid")
				t.Setenv("FAKEOPA_PIDFILE", pidFile)
				ev := warmEvaluator(t, NewEvalEvaluator(fakeOPA(t, tt.bin), t.TempDir(), timeout), spares)
				if tt.childPID && spares > 0 {
					// The spare's child first in the file, before the
					// refill's: the one the decision must kill.
					require.Eventually(t, func() bool {
						raw, err := os.ReadFile(pidFile)
						return err == nil && bytes.HasSuffix(raw, []byte("\n"))
					}, 5*time.Second, 5*time.Millisecond)
				}

				start := time.Now()
				got, err := ev.Evaluate(t.Context(), big)
				elapsed := time.Since(start)

				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.want)
				assert.Equal(t, engine.Verdict{}, got)
				assert.Less(t, elapsed, timeout+3*time.Second, "not the fake's minute")
				if tt.maxErrLen > 0 {
					assert.LessOrEqual(t, len(err.Error()), tt.maxErrLen)
				}
				if tt.childPID {
					assertChildKilled(t, pidFile)
				}
			})
		}
	}
}

// TestEvalEvaluatorStraggler runs a fake opa that exits 0 with a valid
// verdict but leaves a child holding stdout: the run must end at WaitDelay,
// long before the timeout, with an error, and the child must be killed.
func TestEvalEvaluatorStraggler(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	t.Setenv("FAKEOPA_PIDFILE", pidFile)
	ev := NewEvalEvaluator(fakeOPA(t, "straggler.sh"), t.TempDir(), time.Minute)

	start := time.Now()
	got, err := ev.Evaluate(t.Context(), opaInput(nil))
	elapsed := time.Since(start)

	require.ErrorIs(t, err, exec.ErrWaitDelay)
	assert.Equal(t, engine.Verdict{}, got)
	assert.Less(t, elapsed, opaWaitDelay+3*time.Second, "not the minute of the timeout")
	assertChildKilled(t, pidFile)
}

// assertChildKilled checks that the child of the first fake started (the
// first line of pidFile) died: the decision's, since a spare it takes was
// started before the one that refills the pool.
func assertChildKilled(t *testing.T, pidFile string) {
	t.Helper()
	raw, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	first, _, _ := strings.Cut(string(raw), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	require.NoError(t, err)
	assert.Eventually(t, func() bool { return processGone(pid) }, 2*time.Second, 10*time.Millisecond,
		"child %d of the fake opa survived", pid)
}

func TestEvalEvaluatorCallerCancel(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	t.Setenv("FAKEOPA_PIDFILE", pidFile)
	ev := NewEvalEvaluator(fakeOPA(t, "sleep.sh"), t.TempDir(), time.Minute)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()

	start := time.Now()
	got, err := ev.Evaluate(ctx, opaInput(nil))
	elapsed := time.Since(start)

	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "canceled")
	assert.Equal(t, engine.Verdict{}, got)
	assert.Less(t, elapsed, 200*time.Millisecond+3*time.Second, "not the minute of the timeout")
	assertChildKilled(t, pidFile)
}

// writePolicy writes a one-module policy dir for real-opa fault tests.
func writePolicy(t *testing.T, module string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.rego"), []byte(module), 0o600))
	return dir
}

func TestEvalEvaluatorPolicyFaults(t *testing.T) {
	tests := []struct {
		name   string
		module string
		want   string
	}{
		{"does not compile", "package svc.policy\n\ndecision := if {\n", "rego_parse_error"},
		{"no decision rule", "package svc.policy\n\nother := 1\n", "policy decision is undefined"},
		{"decision not an object", "package svc.policy\n\ndecision := \"allow\"\n", "not an object of strings"},
		{"decision lacks reason", "package svc.policy\n\ndecision := {\"decision\": \"allow\", \"rule\": \"r\"}\n", "lacks decision, rule or reason"},
		{"runtime error", "package svc.policy\n\ndecision := {\"decision\": \"allow\", \"rule\": \"r\", \"reason\": sprintf(\"%d\", [1 / input.zero])}\n", "eval_builtin_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ev := NewEvalEvaluator(opaTestBin(t), writePolicy(t, tt.module), 10*time.Second)
			got, err := ev.Evaluate(t.Context(), json.RawMessage(`{"zero": 0}`))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.Equal(t, engine.Verdict{}, got)
		})
	}
}

func TestEvalEvaluatorCheck(t *testing.T) {
	opa := opaTestBin(t)
	pack := bundledPack(t)
	tests := []struct {
		name    string
		bin     string
		dir     string
		timeout time.Duration
		want    string // "" means Check passes
	}{
		{"real opa and bundled pack", opa, pack, 10 * time.Second, ""},
		{"missing binary", fakeOPA(t, "no-such-opa"), pack, 10 * time.Second, "not runnable"},
		{"failing binary", fakeOPA(t, "fail.sh"), pack, 10 * time.Second, "not runnable"},
		{"hanging binary", fakeOPA(t, "sleep.sh"), pack, 300 * time.Millisecond, "not runnable"},
		{"garbage output", fakeOPA(t, "garbage.sh"), pack, 10 * time.Second, "does not compile or yields no decision"},
		{"broken policy", opa, writePolicy(t, "package svc.policy\n\ndecision := if {\n"), 10 * time.Second, "does not compile"},
		{"policy without decision", opa, writePolicy(t, "package svc.policy\n\nother := 1\n"), 10 * time.Second, "yields no decision"},
		{"empty policy dir", opa, t.TempDir(), 10 * time.Second, "yields no decision"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := NewEvalEvaluator(tt.bin, tt.dir, tt.timeout).Check(t.Context())
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestParseOPAVerdict(t *testing.T) {
	const value = `{"decision":"deny","rule":"svc.policy/frozen","reason":"frozen"}`
	tests := []struct {
		name string
		out  string
		want string // error substring; "" means a valid verdict
	}{
		{"valid", `{"result":[{"expressions":[{"value":` + value + `,"text":"q"}]}]}`, ""},
		{"undefined", `{}`, "undefined"},
		{"empty result", `{"result":[]}`, "undefined"},
		{"two results", `{"result":[{"expressions":[{"value":` + value + `}]},{"expressions":[{"value":` + value + `}]}]}`, "2 results"},
		{"two expressions", `{"result":[{"expressions":[{"value":` + value + `},{"value":` + value + `}]}]}`, "2 expressions"},
		{"no expressions", `{"result":[{}]}`, "0 expressions"},
		{"no value", `{"result":[{"expressions":[{}]}]}`, "not an object"},
		{"string value", `{"result":[{"expressions":[{"value":"allow"}]}]}`, "not an object"},
		{"null value", `{"result":[{"expressions":[{"value":null}]}]}`, "lacks"},
		{"numeric decision", `{"result":[{"expressions":[{"value":{"decision":1,"rule":"r","reason":"x"}}]}]}`, "not an object of strings"},
		{"missing rule", `{"result":[{"expressions":[{"value":{"decision":"allow","reason":"x"}}]}]}`, "lacks"},
		{"empty rule", `{"result":[{"expressions":[{"value":{"decision":"allow","rule":"","reason":"x"}}]}]}`, "invalid"},
		{"unknown decision", `{"result":[{"expressions":[{"value":{"decision":"ALLOW","rule":"r","reason":"x"}}]}]}`, "invalid"},
		{"trailing garbage", `{"result":[]} x`, "parse opa output"},
		{"errors document", `{"errors":[{"message":"boom"}]}`, "undefined"},
		{"empty output", ``, "parse opa output"},
		{"extra members", `{"result":[{"expressions":[{"value":{"decision":"deny","rule":"svc.policy/frozen","reason":"frozen","reasons":[],"Decisions":"allow"},"text":"q","location":{"row":1,"col":1}}],"bindings":{}}],"metrics":{}}`, ""},
		{"folded decision after decision", `{"result":[{"expressions":[{"value":{"decision":"deny","deciſion":"allow","rule":"r","reason":"x"}}]}]}`, `"deciſion" spells "decision" another way`},
		{"capitalised decision only", `{"result":[{"expressions":[{"value":{"Decision":"allow","RULE":"r","Reason":"x"}}]}]}`, `spells "decision" another way`},
		{"Result member", `{"Result":[{"expressions":[{"value":` + value + `}]}]}`, `"Result" spells "result" another way`},
		{"folded result after result", `{"result":[],"reſult":[{"expressions":[{"value":` + value + `}]}]}`, `"reſult" spells "result" another way`},
		{"Expressions member", `{"result":[{"EXPRESSIONS":[{"value":` + value + `}]}]}`, `"EXPRESSIONS" spells "expressions" another way`},
		{"Value member", `{"result":[{"expressions":[{"Value":` + value + `}]}]}`, `"Value" spells "value" another way`},
		{"duplicate result", `{"result":[{"expressions":[{"value":` + value + `}]}],"result":[]}`, `"result" appears twice`},
		{"duplicate value", `{"result":[{"expressions":[{"value":` + value + `,"value":` + value + `}]}]}`, `"value" appears twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseOPAVerdict([]byte(tt.out))
			if tt.want == "" {
				require.NoError(t, err)
				assert.Equal(t, engine.Verdict{Decision: engine.Deny, Rule: "svc.policy/frozen", Reason: "frozen"}, got)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.Equal(t, engine.Verdict{}, got)
		})
	}
}

func TestOPAOutputKeepsPrefix(t *testing.T) {
	tests := []struct {
		name   string
		writes []string
		want   string
		over   bool
	}{
		{"under limit", []string{"ab", "cd"}, "abcd", false},
		{"at limit", []string{"abcde"}, "abcde", false},
		{"over in one write", []string{"abcdefg"}, "abcde", true},
		{"over across writes", []string{"abc", "def", "gh"}, "abcde", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &opaOutput{limit: 5}
			for _, w := range tt.writes {
				n, err := o.Write([]byte(w))
				require.NoError(t, err)
				assert.Equal(t, len(w), n, "a write always reports full length")
			}
			assert.Equal(t, tt.want, o.buf.String())
			assert.Equal(t, tt.over, o.over)
		})
	}
}

func TestOPASnippet(t *testing.T) {
	long := strings.Repeat("é", opaMaxSnippet)
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"collapses whitespace", "a\n  b\t\tc\n", "a b c"},
		{"empty", " \n ", ""},
		{"invalid utf-8", "a\xffb", "a?b"},
		{"cut on a rune boundary", long, strings.Repeat("é", opaMaxSnippet/2) + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, opaSnippet([]byte(tt.in)))
		})
	}
}

// RuleFrozen is the bundled pack's kill-switch rule, which the tests expect.
const RuleFrozen = "svc.policy/frozen"
