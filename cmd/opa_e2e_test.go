package cmd_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/rego"
)

// bundledPackDir writes the bundled policy pack for one test.
func bundledPackDir(t *testing.T) string {
	t.Helper()
	dir, cleanup, err := rego.Materialize()
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, cleanup()) })
	return dir
}

// externalOPA is an `opa run --server` on loopback TCP that the test, not
// svc, runs: the OPA container of docker compose.
type externalOPA struct {
	URL  string
	addr string
	dir  string
	cmd  *exec.Cmd
}

func startExternalOPA(t *testing.T, dir string) *externalOPA {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	o := &externalOPA{addr: ln.Addr().String(), dir: dir}
	require.NoError(t, ln.Close())
	o.URL = "http://" + o.addr
	o.start(t)
	t.Cleanup(o.kill)
	return o
}

// start runs opa on o's address and waits until it answers.
func (o *externalOPA) start(t *testing.T) {
	t.Helper()
	o.cmd = exec.Command("opa", "run", "--server", "--addr", o.addr, "--log-level", "error", "--skip-version-check", o.dir)
	require.NoError(t, o.cmd.Start())
	require.Eventually(t, func() bool {
		resp, err := http.Get(o.URL + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 20*time.Second, 10*time.Millisecond, "external opa did not start")
}

func (o *externalOPA) kill() {
	if o.cmd.ProcessState == nil {
		_ = o.cmd.Process.Kill()
		_ = o.cmd.Wait()
	}
}

// opaLog is one "opa server started|ready" line of a server-mode engine.
type opaLog struct {
	Message string `json:"message"`
	PID     int    `json:"pid"`
}

// opaServerLogs returns the engine's supervisor lines with message msg.
func opaServerLogs(p *engineProc, msg string) []opaLog {
	var out []opaLog
	s := bufio.NewScanner(strings.NewReader(p.Logs()))
	for s.Scan() {
		var rec opaLog
		if json.Unmarshal(s.Bytes(), &rec) == nil && rec.Message == msg {
			out = append(out, rec)
		}
	}
	return out
}

// opaGone reports whether pid has exited (absent, or a zombie).
func opaGone(pid int) bool {
	_, fields, ok := procStat(pid)
	return !ok || len(fields) > 0 && (fields[0] == "Z" || fields[0] == "X")
}

// procStat reads /proc/<pid>/stat: the process's command name and the
// fields after it (state, parent pid, ...); ok is false once it is gone.
func procStat(pid int) (name string, fields []string, ok bool) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", nil, false
	}
	open, shut := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
	if open < 0 || shut < open {
		return "", nil, false
	}
	return string(stat[open+1 : shut]), strings.Fields(string(stat[shut+1:])), true
}

// modeStep is one envelope of the parity sequence and the rule it must hit.
type modeStep struct {
	rule  string
	edits map[string]any
}

func modeSequence() []modeStep {
	prod := func(verb, rev, radius string) map[string]any {
		return map[string]any{"action.verb": verb, "axes.reversibility": rev, "axes.blast_radius": radius,
			"target.environment": "production"}
	}
	seq := []modeStep{
		{"svc.policy/read_only_internal", nil},
		{"svc.policy/default_allow", map[string]any{"axes.externality": "outbound"}},
		{"svc.policy/default_allow", map[string]any{"action.verb": "update"}},
		{"svc.policy/irreversible_systemic_prod", prod("delete", "irreversible", "systemic")},
		{"svc.policy/irreversible_broad_prod", prod("delete", "irreversible", "broad")},
		{"svc.policy/default_allow", prod("delete", "recoverable", "systemic")},
	}
	budget := func(session, verb, ext string, count int) map[string]any {
		return map[string]any{"agent.session_id": session, "agent.id": "agent-" + session, "agent.on_behalf_of": "human:" + session,
			"action.verb": verb, "axes.externality": ext, "magnitude.count": count}
	}
	pay := func(amount any) map[string]any {
		return map[string]any{"agent.session_id": "b-pay", "agent.id": "agent-b-pay", "action.verb": "transfer",
			"params": map[string]any{"amount": amount, "currency": "EUR"}}
	}
	for range 4 {
		seq = append(seq, modeStep{"svc.policy/default_allow", budget("b-del", "delete", "internal", 5)})
	}
	seq = append(seq, modeStep{"svc.policy/session_delete_budget", budget("b-del", "delete", "internal", 1)},
		modeStep{"svc.policy/default_allow", budget("b-del", "update", "internal", 5)},
		modeStep{"svc.policy/agent_delete_budget", map[string]any{"agent.session_id": "b-del-2", "agent.id": "agent-b-del",
			"action.verb": "delete", "magnitude.count": 1}},
		modeStep{"svc.policy/default_allow", pay("4000.00")},
		modeStep{"svc.policy/session_money_budget", pay("1000.0001")},
		modeStep{"svc.policy/default_allow", budget("b-send", "emit", "outbound", 25)},
		modeStep{"svc.policy/default_allow", budget("b-send", "emit", "outbound", 25)},
		modeStep{"svc.policy/cumulative_budget", budget("b-send", "emit", "outbound", 1)},
		modeStep{"svc.policy/default_allow", budget("b-obj", "create", "internal", 100)},
		modeStep{"svc.policy/default_allow", budget("b-obj", "create", "internal", 100)},
		modeStep{"svc.policy/cumulative_budget", budget("b-obj", "read", "internal", 1)})
	return seq
}

// TestOPAModesAgree sends one envelope sequence to an engine per OPA mode
// (eval, supervised server, external server) and requires the same answers,
// for the bundled pack, frozen, and a pack with broken thresholds.
func TestOPAModesAgree(t *testing.T) {
	broken := bundledPackDir(t)
	require.NoError(t, os.WriteFile(filepath.Join(broken, "data.json"), []byte(`{"svc":{"thresholds":{"deletes":20}}}`), 0o600))
	variants := []struct {
		name   string
		env    map[string]string
		dir    string
		expect func(modeStep) string
	}{
		{"bundled", nil, bundledPackDir(t), func(s modeStep) string { return s.rule }},
		{"frozen", map[string]string{"SVC_FREEZE": "true"}, bundledPackDir(t), frozenRule},
		{"broken thresholds", nil, broken, func(modeStep) string { return "svc.policy/invalid_thresholds" }},
	}
	seen := map[string]bool{}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			external := startExternalOPA(t, v.dir)
			engines := map[string]*engineProc{}
			for mode, extra := range map[string]map[string]string{
				"eval":     {"SVC_OPA_MODE": "eval", "SVC_POLICY_DIR": v.dir},
				"server":   {"SVC_OPA_MODE": "server", "SVC_POLICY_DIR": v.dir},
				"external": {"SVC_OPA_URL": external.URL},
			} {
				env := baseEnv(t)
				for k, val := range v.env {
					env[k] = val
				}
				for k, val := range extra {
					env[k] = val
				}
				engines[mode] = startEngine(t, env)
			}
			for i, s := range modeSequence() {
				want := engines["eval"].decide(t, envelope(s.edits))
				require.Equal(t, 200, want.Status, "modeStep %d: %v", i, want.Body)
				assert.Equal(t, v.expect(s), want.str("rule"), "modeStep %d", i)
				seen[want.str("rule")] = true
				for _, mode := range []string{"server", "external"} {
					got := engines[mode].decide(t, envelope(s.edits))
					assert.Equal(t, want.Status, got.Status, "modeStep %d, %s", i, mode)
					for _, key := range []string{"decision", "rule", "reason", "verb", "environment", "envelope_hash"} {
						assert.Equal(t, want.str(key), got.str(key), "modeStep %d, %s: %s", i, mode, key)
					}
				}
			}
		})
	}
	for _, rule := range []string{"default_allow", "read_only_internal", "frozen", "irreversible_systemic_prod",
		"irreversible_broad_prod", "session_delete_budget", "cumulative_budget", "invalid_thresholds",
		"agent_delete_budget", "session_money_budget"} {
		assert.True(t, seen["svc.policy/"+rule], "no modeStep hit %s", rule)
	}
}

// frozenRule is the rule a frozen engine answers: frozen for every non-read,
// and the read rules otherwise, no budget being charged while frozen.
func frozenRule(s modeStep) string {
	switch {
	case s.edits["action.verb"] != nil && s.edits["action.verb"] != "read":
		return "svc.policy/frozen"
	case s.edits["axes.externality"] == "outbound":
		return "svc.policy/default_allow"
	}
	return "svc.policy/read_only_internal"
}

// loadTally counts the answers of a decision load.
type loadTally struct {
	allows, held, denies atomic.Int64
	mu                   sync.Mutex
	bad                  []string
}

// loadStep is one kind of envelope of a decision load and the verdict the
// policy gives it.
type loadStep struct {
	edits    map[string]any
	decision string
	rule     string
}

// loadSteps mix an allow, a hold and a policy deny, so that an allow made
// up without an evaluation would not pass for a verdict.
var loadSteps = []loadStep{
	{nil, "allow", "svc.policy/read_only_internal"},
	{map[string]any{"action.verb": "delete", "target.environment": "production",
		"axes.reversibility": "irreversible", "axes.blast_radius": "broad"},
		"require_approval", "svc.policy/irreversible_broad_prod"},
	{map[string]any{"action.verb": "delete", "target.environment": "production",
		"axes.reversibility": "irreversible", "axes.blast_radius": "systemic"},
		"deny", "svc.policy/irreversible_systemic_prod"},
}

// check classifies one answer to step: its policy verdict, or the
// fail-closed deny of an unavailable policy engine. Anything else is
// recorded as bad.
func (l *loadTally) check(step loadStep, r response) {
	rule := r.str("rule")
	switch {
	case r.Status == 200 && r.str("decision") == step.decision && rule == step.rule:
		switch step.decision {
		case "allow":
			l.allows.Add(1)
		case "require_approval":
			l.held.Add(1)
		}
	case r.Status == 500 && r.str("decision") == "deny" && rule == "svc.core/internal_error":
		l.denies.Add(1)
	default:
		l.mu.Lock()
		l.bad = append(l.bad, fmt.Sprintf("%s: %d %v", step.rule, r.Status, r.Body))
		l.mu.Unlock()
	}
}

// decideLoad posts the mix of loadSteps from workers until stop is closed.
func decideLoad(t *testing.T, p *engineProc, tally *loadTally, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				step := loadSteps[i%len(loadSteps)]
				edits := map[string]any{"agent.session_id": fmt.Sprintf("load-%d-%d", w, i)}
				for k, v := range step.edits {
					edits[k] = v
				}
				tally.check(step, p.decide(t, envelope(edits)))
			}
		})
	}
	return &wg
}

// TestOPAServerKilledMidLoad kills the supervised opa with SIGKILL while
// decisions flow (reads, holds, policy denies): every answer is the
// envelope's policy verdict or a fail-closed deny, never an allow of what
// the policy holds or denies; some denies happen, and allows resume once
// the supervisor restarted it.
func TestOPAServerKilledMidLoad(t *testing.T) {
	env := baseEnv(t)
	env["SVC_OPA_MODE"] = "server"
	p := startEngine(t, env)
	started := opaServerLogs(p, "opa server started")
	require.Len(t, started, 1, p.Logs())
	first := started[0].PID

	tally := &loadTally{}
	stop := make(chan struct{})
	wg := decideLoad(t, p, tally, stop)
	require.Eventually(t, func() bool { return tally.allows.Load() >= 20 }, 20*time.Second, time.Millisecond)
	require.NoError(t, syscall.Kill(first, syscall.SIGKILL))
	require.Eventually(t, func() bool { return tally.denies.Load() > 0 }, 10*time.Second, time.Millisecond,
		"no deny while opa was down")
	require.Eventually(t, func() bool { return len(opaServerLogs(p, "opa server ready")) == 2 }, 20*time.Second,
		10*time.Millisecond, "the supervisor did not restart opa:\n%s", p.Logs())
	resumed := tally.allows.Load()
	require.Eventually(t, func() bool { return tally.allows.Load() >= resumed+20 }, 20*time.Second, time.Millisecond,
		"allows did not resume")
	close(stop)
	wg.Wait()

	assert.Empty(t, tally.bad, "answers neither the policy's verdict nor a fail-closed deny")
	assert.Positive(t, tally.held.Load(), "holds were decided too")
	t.Logf("%d allows, %d holds, %d denies", tally.allows.Load(), tally.held.Load(), tally.denies.Load())
	restarted := opaServerLogs(p, "opa server started")
	require.Len(t, restarted, 2)
	assert.NotEqual(t, first, restarted[1].PID)
	p.stop(t)
	assert.True(t, opaGone(restarted[1].PID), "opa outlived svc")
}

// TestOPAURL covers an OPA server svc does not manage: it must be reachable
// and carry the svc.policy package at start-up; later, while it is away,
// every decision is denied, and decisions resume when it is back.
func TestOPAURL(t *testing.T) {
	t.Run("unreachable at start-up", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		url := "http://" + ln.Addr().String()
		require.NoError(t, ln.Close())
		env := baseEnv(t)
		env["SVC_OPA_URL"] = url
		code, out := runFailing(t, env)
		assert.Equal(t, 1, code, out)
		assert.Contains(t, out, "SVC_OPA_URL="+url)
		assert.Contains(t, out, "connection refused")
	})
	t.Run("server without the svc.policy package", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "other.rego"), []byte("package other\n\nx := 1\n"), 0o600))
		env := baseEnv(t)
		env["SVC_OPA_URL"] = startExternalOPA(t, dir).URL
		code, out := runFailing(t, env)
		assert.Equal(t, 1, code, out)
		assert.Contains(t, out, "SVC_OPA_URL")
		assert.Contains(t, out, "is package svc.policy loaded")
	})
	t.Run("decides, denies while away, resumes", func(t *testing.T) {
		opa := startExternalOPA(t, bundledPackDir(t))
		env := baseEnv(t)
		env["SVC_OPA_URL"] = opa.URL + "/"
		env["SVC_OPA_TIMEOUT"] = "1"
		p := startEngine(t, env)
		assert.Equal(t, "svc.policy/read_only_internal", p.decide(t, envelope(nil)).str("rule"))

		opa.kill()
		start := time.Now()
		r := p.decide(t, envelope(nil))
		assert.Less(t, time.Since(start), 4*time.Second, "within SVC_OPA_TIMEOUT and slack")
		assert.Equal(t, 500, r.Status)
		assert.Equal(t, "deny", r.str("decision"))
		assert.Equal(t, "svc.core/internal_error", r.str("rule"))

		opa.start(t)
		r = p.decide(t, envelope(nil))
		assert.Equal(t, 200, r.Status, "%v", r.Body)
		assert.Equal(t, "svc.policy/read_only_internal", r.str("rule"))
	})
}

func TestOPAServerModeStartupRefusals(t *testing.T) {
	bad := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bad, "bad.rego"), []byte("package svc.policy\ndecision := {"), 0o644))
	bare := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bare, "p.rego"), []byte("package svc.policy\n\nother := 1\n"), 0o644))
	cases := map[string]struct {
		env  map[string]string
		want string
	}{
		"opa missing":             {map[string]string{"SVC_OPA_BIN": "/nonexistent/opa"}, "/nonexistent/opa"},
		"policy that won't parse": {map[string]string{"SVC_POLICY_DIR": bad}, "rego_parse_error"},
		"policy without decision": {map[string]string{"SVC_POLICY_DIR": bare}, "is package svc.policy loaded"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			env := baseEnv(t)
			env["SVC_OPA_MODE"] = "server"
			for k, v := range c.env {
				env[k] = v
			}
			code, out := runFailing(t, env)
			assert.Equal(t, 1, code, out)
			assert.Contains(t, out, "SVC_OPA_MODE=server")
			assert.Contains(t, out, c.want)
		})
	}
}

// TestOPAServerDiesWithSvc: a supervised opa does not outlive an svc that
// is killed without a chance to close it.
func TestOPAServerDiesWithSvc(t *testing.T) {
	env := baseEnv(t)
	env["SVC_OPA_MODE"] = "server"
	p := startEngine(t, env)
	started := opaServerLogs(p, "opa server started")
	require.Len(t, started, 1, p.Logs())
	require.False(t, opaGone(started[0].PID))

	require.NoError(t, p.cmd.Process.Kill())
	<-p.done
	assert.Eventually(t, func() bool { return opaGone(started[0].PID) }, 5*time.Second, 10*time.Millisecond,
		"opa %d outlived a killed svc", started[0].PID)
}

// TestEvalSparesDieWithSvc: the opa eval processes eval mode keeps started
// ahead of decisions are killed when svc stops, and by the kernel when svc
// is killed without a chance to close them.
func TestEvalSparesDieWithSvc(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			env := baseEnv(t)
			env["SVC_OPA_EVAL_SPARES"] = "2"
			p := startEngine(t, env)
			assert.Contains(t, p.Logs(), `"opa_eval_spares":2`)
			var spares []int
			require.Eventually(t, func() bool {
				spares = opaChildren(t, p.cmd.Process.Pid)
				return len(spares) == 2
			}, 10*time.Second, 20*time.Millisecond, "two spares wait after the start-up check")

			require.NoError(t, p.cmd.Process.Signal(sig))
			<-p.done
			for _, pid := range spares {
				assert.Eventually(t, func() bool { return opaGone(pid) }, 5*time.Second, 10*time.Millisecond,
					"spare opa %d outlived svc (%s)", pid, sig)
			}
		})
	}
}

// opaChildren lists the running processes named opa whose parent is pid.
func opaChildren(t *testing.T, pid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var kids []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		name, fields, ok := procStat(child)
		if ok && name == "opa" && len(fields) > 1 && fields[1] == strconv.Itoa(pid) && !opaGone(child) {
			kids = append(kids, child)
		}
	}
	return kids
}
