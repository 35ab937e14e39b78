package opa

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/envelope"
	"github.com/svc-dev/svc/rego"
)

// brokenThresholdsPack is the bundled pack with a budget threshold missing.
func brokenThresholdsPack(t *testing.T) string {
	t.Helper()
	dir := bundledPack(t)
	data := `{"svc": {"thresholds": {"deletes": 20, "objects": 200}}}`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "data.json"), []byte(data), 0o600))
	return dir
}

// brokenTablesPack is the bundled pack with one sensitive-action table
// malformed (a misspelt list of fragments) and its thresholds valid: reads
// are decided, every other action is denied (invalid_thresholds).
func brokenTablesPack(t *testing.T) string {
	t.Helper()
	dir := bundledPack(t)
	path := filepath.Join(dir, "data.json")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	broken := strings.Replace(string(data), `"fragments"`, `"fragment"`, 1)
	require.NotEqual(t, string(data), broken)
	require.NoError(t, os.WriteFile(path, []byte(broken), 0o600))
	return dir
}

// policyRules are the rule identifiers policy.rego can return.
func policyRules(t *testing.T) map[string]bool {
	t.Helper()
	src, err := fs.ReadFile(rego.Files(), "policy.rego")
	require.NoError(t, err)
	rules := map[string]bool{}
	for _, r := range regexp.MustCompile(`"(svc\.policy/[a-z_]+)"`).FindAllStringSubmatch(string(src), -1) {
		if !strings.HasSuffix(r[1], "_") { // svc.policy/sensitive_: a prefix, named by data.json's tables
			rules[r[1]] = true
		}
	}
	require.Len(t, rules, 16, "policy.rego changed: extend the parity table")
	body, err := fs.ReadFile(rego.Files(), "data.json")
	require.NoError(t, err)
	var data struct {
		Svc struct {
			Sensitive map[string]any `json:"sensitive"`
		} `json:"svc"`
	}
	require.NoError(t, json.Unmarshal(body, &data))
	for name := range data.Svc.Sensitive {
		rules["svc.policy/sensitive_"+name] = true
	}
	require.Len(t, rules, 21, "data.json's sensitive tables changed: extend the parity table")
	return rules
}

// withMoney sets the envelope's money (none when amount is "": as parsed
// from params) and the session's and agent's spending, after act.
func withMoney(amount, currency string, session, agent engine.Usage, act func(*engine.PolicyInput)) func(*engine.PolicyInput) {
	return func(in *engine.PolicyInput) {
		act(in)
		if amount != "" {
			units, err := strconv.ParseInt(amount, 10, 64) // whole amounts only, here
			if err != nil {
				panic(err)
			}
			in.Envelope.Money = &envelope.Money{Amount: amount, Units: units * 10_000,
				Currency: envelope.CanonicalCurrency(currency), RawCurrency: currency}
		}
		in.Cumulative.Usage, in.Cumulative.Agent = session, agent
	}
}

// withWords sets the action's words, after act.
func withWords(act func(*engine.PolicyInput), words ...string) func(*engine.PolicyInput) {
	return func(in *engine.PolicyInput) {
		act(in)
		in.ActionWords = words
	}
}

// withPrincipal sets the principal's spending, after act.
func withPrincipal(principal engine.Usage, act func(*engine.PolicyInput)) func(*engine.PolicyInput) {
	return func(in *engine.PolicyInput) {
		act(in)
		in.Envelope.Agent.OnBehalfOf = "human:probe"
		in.Cumulative.Principal = principal
	}
}

// parityCase is one policy input and the rule it must hit.
type parityCase struct {
	name  string
	input json.RawMessage
	rule  string
}

func parityCases() []parityCase {
	act := withAction
	cases := []struct {
		name string
		edit func(*engine.PolicyInput)
		rule string
	}{
		{"default allow", nil, "svc.policy/default_allow"},
		{"read internal", act("read", "production", "reversible", "single", "internal", 1), "svc.policy/read_only_internal"},
		{"read outbound", act("read", "dev", "reversible", "single", "outbound", 1), "svc.policy/default_allow"},
		{"frozen delete", withPrior(0, 0, 0, true, act("delete", "dev", "reversible", "single", "internal", 1)), RuleFrozen},
		{"frozen emit", withPrior(0, 0, 0, true, act("emit", "production", "reversible", "single", "outbound", 1)), RuleFrozen},
		{"frozen read", withPrior(0, 0, 0, true, act("read", "dev", "reversible", "single", "internal", 1)), "svc.policy/read_only_internal"},
		{"frozen beats systemic", withPrior(0, 0, 0, true, act("delete", "production", "irreversible", "systemic", "internal", 1)), RuleFrozen},
		{"frozen read budget", withPrior(0, 0, 199, true, act("read", "dev", "reversible", "single", "internal", 2)), "svc.policy/cumulative_budget"},
		{"systemic prod", act("delete", "production", "irreversible", "systemic", "internal", 1), "svc.policy/irreversible_systemic_prod"},
		{"broad prod", act("delete", "production", "irreversible", "broad", "internal", 1), "svc.policy/irreversible_broad_prod"},
		{"broad staging", act("delete", "staging", "irreversible", "broad", "internal", 1), "svc.policy/default_allow"},
		{"broad prod beats budget", withPrior(18, 0, 0, false, act("delete", "production", "irreversible", "broad", "internal", 5)), "svc.policy/irreversible_broad_prod"},
		{"deletes at limit", withPrior(15, 0, 0, false, act("delete", "dev", "reversible", "single", "internal", 5)), "svc.policy/default_allow"},
		{"deletes over limit", withPrior(16, 0, 0, false, act("delete", "dev", "reversible", "single", "internal", 5)), "svc.policy/session_delete_budget"},
		{"one huge delete", act("delete", "dev", "reversible", "single", "internal", 21), "svc.policy/session_delete_budget"},
		{"deletes spent, update", withPrior(20, 0, 0, false, act("update", "dev", "reversible", "single", "internal", 5)), "svc.policy/default_allow"},
		{"sends at limit", withPrior(0, 40, 0, false, act("emit", "dev", "reversible", "single", "outbound", 10)), "svc.policy/default_allow"},
		{"sends over limit", withPrior(0, 41, 0, false, act("emit", "dev", "reversible", "single", "outbound", 10)), "svc.policy/cumulative_budget"},
		{"objects at limit", withPrior(0, 0, 190, false, act("update", "dev", "reversible", "single", "internal", 10)), "svc.policy/default_allow"},
		{"objects over limit", withPrior(0, 0, 191, false, act("update", "dev", "reversible", "single", "internal", 10)), "svc.policy/cumulative_budget"},
		{"delete budget first", withPrior(0, 50, 200, false, act("delete", "dev", "reversible", "single", "outbound", 30)), "svc.policy/session_delete_budget"},
		{"money over limit", withMoney("4000", "EUR", engine.Usage{Money: engine.Amounts{"EUR": 4000_0000}}, engine.Usage{}, act("transact", "dev", "reversible", "single", "outbound", 1)), "svc.policy/session_money_budget"},
		{"money without currency", withMoney("1", "", engine.Usage{}, engine.Usage{}, act("transact", "dev", "reversible", "single", "outbound", 1)), "svc.policy/session_money_budget"},
		{"money within limit", withMoney("4000", "EUR", engine.Usage{}, engine.Usage{}, act("transact", "dev", "reversible", "single", "outbound", 1)), "svc.policy/default_allow"},
		{"agent deletes over limit", withMoney("", "", engine.Usage{}, engine.Usage{Totals: engine.Totals{Deletes: 20}}, act("delete", "dev", "reversible", "single", "internal", 1)), "svc.policy/agent_delete_budget"},
		{"agent objects over limit", withMoney("", "", engine.Usage{}, engine.Usage{Totals: engine.Totals{Objects: 1000}}, act("update", "dev", "reversible", "single", "internal", 1)), "svc.policy/agent_cumulative_budget"},
		{"agent money over limit", withMoney("4000", "EUR", engine.Usage{}, engine.Usage{Money: engine.Amounts{"EUR": 7000_0000}}, act("transact", "dev", "reversible", "single", "outbound", 1)), "svc.policy/agent_money_budget"},
		{"principal deletes over limit", withPrincipal(engine.Usage{Totals: engine.Totals{Deletes: 40}}, act("delete", "dev", "reversible", "single", "internal", 1)), "svc.policy/principal_delete_budget"},
		{"principal sends over limit", withPrincipal(engine.Usage{Totals: engine.Totals{ExternalSends: 200}}, act("emit", "dev", "reversible", "single", "outbound", 1)), "svc.policy/principal_cumulative_budget"},
		{"principal money over limit", withPrincipal(engine.Usage{Money: engine.Amounts{"EUR": 1_9000_0000}}, withMoney("4000", "EUR", engine.Usage{}, engine.Usage{}, act("transact", "dev", "reversible", "single", "outbound", 1))), "svc.policy/principal_money_budget"},
		{"privilege change", withWords(act("update", "production", "reversible", "single", "internal", 1), "grant", "admin"), "svc.policy/sensitive_privilege"},
		{"security control change", withWords(act("update", "production", "reversible", "single", "internal", 1), "disable", "mfa"), "svc.policy/sensitive_security_control"},
		{"credential change", withWords(act("update", "production", "reversible", "single", "internal", 1), "set", "webhook", "endpoint"), "svc.policy/sensitive_credential"},
		{"payment", withWords(act("update", "production", "reversible", "single", "internal", 1), "create", "payout"), "svc.policy/sensitive_payment"},
		{"plugin installation", withWords(act("execute", "production", "reversible", "single", "internal", 1), "install", "plugin"), "svc.policy/sensitive_install"},
		{"privilege change in staging", withWords(act("update", "staging", "reversible", "single", "internal", 1), "grant", "admin"), "svc.policy/default_allow"},
		{"non-canonical verb", act("drop", "dev", "reversible", "single", "internal", 1), "svc.policy/invalid_input"},
		{"negative count", act("delete", "dev", "reversible", "single", "internal", -1), "svc.policy/invalid_input"},
		{"non-canonical env", act("delete", "prod", "reversible", "single", "internal", 1), "svc.policy/invalid_input"},
	}
	out := make([]parityCase, 0, len(cases)+1)
	for _, c := range cases {
		out = append(out, parityCase{c.name, opaInput(c.edit), c.rule})
	}
	return append(out, parityCase{"empty input", json.RawMessage(`{}`), "svc.policy/invalid_input"})
}

// TestServerModesMatchEval drives every rule of the bundled pack (and a pack
// with broken thresholds) through opa eval, the supervised server and an
// external server: same input, same verdict, reason included.
func TestServerModesMatchEval(t *testing.T) {
	opa := opaTestBin(t)
	rules := policyRules(t)
	seen := map[string]bool{}
	var mu sync.Mutex
	packs := []struct {
		name string
		dir  string
		rule func(parityCase) string
	}{
		{"bundled", bundledPack(t), func(c parityCase) string { return c.rule }},
		{"broken thresholds", brokenThresholdsPack(t), func(c parityCase) string {
			if c.rule == "svc.policy/invalid_input" {
				return c.rule
			}
			return "svc.policy/invalid_thresholds"
		}},
	}
	for _, pack := range packs {
		t.Run(pack.name, func(t *testing.T) {
			external, _ := startExternalOPA(t, pack.dir)
			rest, err := NewRESTEvaluator(external, 10*time.Second)
			require.NoError(t, err)
			t.Cleanup(func() { assert.NoError(t, rest.Close()) })
			server := startOPAServer(t, opa, pack.dir)
			waitUp(t, server)
			evaluators := map[string]engine.Evaluator{"server": server, "external": rest}
			eval := NewEvalEvaluator(opa, pack.dir, 10*time.Second)
			for _, c := range parityCases() {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					want, err := eval.Evaluate(t.Context(), c.input)
					require.NoError(t, err)
					assert.Equal(t, pack.rule(c), want.Rule)
					for name, ev := range evaluators {
						got, err := ev.Evaluate(t.Context(), c.input)
						require.NoError(t, err, name)
						assert.Equal(t, want, got, name)
					}
					mu.Lock()
					seen[want.Rule] = true
					mu.Unlock()
				})
			}
		})
	}
	assert.Equal(t, rules, seen, "the parity table must hit every rule of policy.rego")
}
