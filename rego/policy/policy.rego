# Package svc.policy is the bundled svc policy pack. Its entry point,
# decision, maps the policy input document (the canonical envelope, its
# action words, what its session, agent and principal spent before it, and
# the kill-switch flag) to exactly one verdict {"decision", "rule",
# "reason", "obligations", "shadow"}. The rules form one else-chain
# (verdict), so the first that matches wins and decision is defined for
# every input. Budget limits, money limits, sensitive-action tables and the
# rules in observe mode are data (data.json beside this file), so operators
# tune them without editing Rego.
#
# svc evaluates this pack for every decision, so it is written to be cheap
# in OPA's evaluator, where every expression, rule and function call costs:
#   - a branch whose body starts with input.<field> == "<constant>" tests is
#     skipped by OPA's rule index, unevaluated, when the input does not match;
#   - verdicts are object literals and the budget checks plain comparisons:
#     no function calls, no every/some loops on the way to a verdict;
#   - the validity guards read each input field once into a local variable,
#     and check whole documents with one regular expression over their JSON
#     text rather than a builtin call per value (each costs about as much);
#   - what depends on the data alone (precomputed: the data checks, the
#     sensitive tables as text) is computed once per server, not once per
#     decision, where svc's supervised OPA runs this pack unchanged for its
#     whole life; elsewhere the data checks run once per batch query
#     (data_valid, input.data_checked);
#   - a read, never sensitive, skips the sensitive-action tables entirely.
# Keep to these when adding a rule (docs/policy.md).
package svc.policy

# canonical is the closed set of canonical values of each enumerated input
# field (engine/envelope/canonical.go folds the raw values into them).
# valid_input repeats them as literal sets, which OPA tests faster;
# policy_test.rego checks that the two agree.
canonical := {
	"verb": {"read", "create", "update", "delete", "execute", "transact", "emit"},
	"environment": {"production", "staging", "dev"},
	"reversibility": {"reversible", "recoverable", "irreversible"},
	"blast_radius": {"single", "scoped", "broad", "systemic"},
	"externality": {"internal", "outbound", "physical"},
}

verbs := canonical.verb

environments := canonical.environment

reversibilities := canonical.reversibility

blast_radii := canonical.blast_radius

externalities := canonical.externality

# decision is the verdict of the rules not marked observe, with the
# obligations it carries and, when an observed rule would have changed it,
# the verdict the pack gives with every rule enforced (shadow).
decision := {
	"decision": v.decision,
	"rule": v.rule,
	"reason": v.reason,
	"obligations": obligations,
	"shadow": shadow,
} if {
	v := verdict
}

# observed are the rule ids marked observe in data.svc.observe (a list):
# their would-be verdicts are recorded as shadow, not enforced. The guards
# (invalid_input, invalid_thresholds, frozen) cannot be observed.
observed := {r | some r in data.svc.observe; is_string(r)}

# shadow is the verdict with every rule enforced, when observed rules exist
# and it differs from the verdict; else null.
shadow := s if {
	data.svc.observe != []
	count(observed) > 0
	s := verdict with data.svc.observe as []
	s != verdict
} else := null

# obligations are the obligations of the verdict: none for a read whose
# verdict writes none (a read matches no sensitive-action table), at once.
obligations := [] if {
	input.envelope.action.verb == "read"
	object.get(verdict, "obligations", []) == []
} else := obligations_of(verdict)

# obligations_of(v) are the obligations a verdict carries: its own, if a
# rule wrote some, and those of every sensitive-action table the action
# matched; none on a deny.
obligations_of(v) := [] if {
	v.decision == "deny"
} else := sort({o | some o in array.concat(object.get(v, "obligations", []), sensitive_obligations)})

# verdict is the else-chain of the rules, the first that matches wins,
# skipping the observed rules. Each branch tests the input first and its
# observed flag last, so that a branch that does not match costs its first
# failing test only.
verdict := {
	"decision": "deny",
	"rule": "svc.policy/invalid_input",
	"reason": "policy input is malformed or carries a non-canonical value",
} if {
	not valid_input
} else := {
	"decision": "deny",
	"rule": "svc.policy/invalid_thresholds",
	"reason": "budget thresholds or sensitive-action tables in data.svc are missing or invalid",
} if {
	not thresholds_ok
} else := {
	"decision": "deny",
	"rule": "svc.policy/frozen",
	"reason": "svc is frozen: every non-read action is denied",
} if {
	input.frozen == true
	input.envelope.action.verb != "read"
} else := {
	"decision": "deny",
	"rule": "svc.policy/irreversible_systemic_prod",
	"reason": "irreversible action with systemic blast radius in production is denied",
} if {
	input.envelope.axes.reversibility == "irreversible"
	input.envelope.axes.blast_radius == "systemic"
	input.envelope.target.environment == "production"
	not observed["svc.policy/irreversible_systemic_prod"]
} else := {
	"decision": "require_approval",
	"rule": "svc.policy/irreversible_broad_prod",
	"reason": "irreversible action with broad blast radius in production requires approval",
} if {
	input.envelope.axes.reversibility == "irreversible"
	input.envelope.axes.blast_radius == "broad"
	input.envelope.target.environment == "production"
	not observed["svc.policy/irreversible_broad_prod"]
} else := {
	# The sensitive-action tables are checked only where they are read (a
	# read is never sensitive): checking them costs every decision about
	# 0.5 ms of OPA's time.
	"decision": "deny",
	"rule": "svc.policy/invalid_thresholds",
	"reason": "budget thresholds or sensitive-action tables in data.svc are missing or invalid",
} if {
	input.envelope.action.verb != "read"
	not sensitive_ok
} else := v if {
	# Sensitive actions: the strictest verdict, in the action's environment,
	# of the tables in data.svc.sensitive the action matches (deny before
	# require_approval, then by table name). An allow there lets the action
	# on to the budgets (with the table's obligations). A read is never
	# sensitive.
	input.envelope.action.verb != "read"
	v := sensitive_verdict
} else := {
	# The budgets, in the order deletes, external_sends, objects: the action
	# is held by the first it would take past its limit. A budget is exceeded
	# only by an action that charges it (see charge below: count > 0 and the
	# verb or externality that budget counts), so a session already past a
	# limit is not held on actions that add nothing to that budget.
	"decision": "require_approval",
	"rule": "svc.policy/session_delete_budget",
	"reason": sprintf("session delete budget exceeded: %v prior + %v requested > limit %v", [prior, n, limit]),
} if {
	input.envelope.action.verb == "delete"
	n := input.envelope.magnitude.count
	n > 0
	prior := input.cumulative.deletes
	limit := data.svc.thresholds.deletes
	prior + n > limit
	not observed["svc.policy/session_delete_budget"]
} else := {
	"decision": "require_approval",
	"rule": "svc.policy/cumulative_budget",
	"reason": sprintf("session external send budget exceeded: %v prior + %v requested > limit %v", [prior, n, limit]),
} if {
	input.envelope.axes.externality == "outbound"
	n := input.envelope.magnitude.count
	n > 0
	prior := input.cumulative.external_sends
	limit := data.svc.thresholds.external_sends
	prior + n > limit
	not observed["svc.policy/cumulative_budget"]
} else := {
	"decision": "require_approval",
	"rule": "svc.policy/cumulative_budget",
	"reason": sprintf("session object budget exceeded: %v prior + %v requested > limit %v", [prior, n, limit]),
} if {
	# Every action charges objects; this branch is on every allow's path,
	# so its cheapest failing test, the comparison, comes first.
	n := input.envelope.magnitude.count
	prior := input.cumulative.objects
	limit := data.svc.thresholds.objects
	prior + n > limit
	n > 0
	not observed["svc.policy/cumulative_budget"]
} else := {
	# The money budget (R5) of the session. An amount is never free: one
	# without a known currency is held, a transaction without an amount is
	# held, and a session that already moved money in one currency is held
	# on its first amount in another (no exchange rates, so amounts in two
	# currencies cannot be added up).
	"decision": "require_approval",
	"rule": "svc.policy/session_money_budget",
	"reason": "a transaction without params.amount cannot be counted against the money budget: approval required",
} if {
	input.envelope.action.verb == "transact"
	not input.envelope.money
	not observed["svc.policy/session_money_budget"]
} else := {
	"decision": "require_approval",
	"rule": "svc.policy/session_money_budget",
	"reason": sprintf("amount %v without a known ISO 4217 currency (sent %q): approval required", [m.amount, m.raw_currency]),
} if {
	m := input.envelope.money
	m.currency == "XXX"
	not observed["svc.policy/session_money_budget"]
} else := {
	"decision": "require_approval",
	"rule": "svc.policy/session_money_budget",
	"reason": sprintf("session already moved money in %v: a first amount in %v requires approval", [concat(", ", sort(object.keys(spent))), m.currency]),
} if {
	m := input.envelope.money
	m.units > 0
	spent := input.cumulative.money
	count(spent) > 0
	not spent[m.currency]
	not observed["svc.policy/session_money_budget"]
} else := {
	"decision": "require_approval",
	"rule": "svc.policy/session_money_budget",
	"reason": money_reason("session", prior, m, limit),
} if {
	m := input.envelope.money
	m.units > 0
	prior := object.get(input.cumulative.money, m.currency, 0)
	limit := money_limit("session", m.currency)
	prior + m.units > limit * 10000
	not observed["svc.policy/session_money_budget"]
} else := {
	# The same budgets per agent and per principal (agent.on_behalf_of),
	# so that a fresh session id resets nothing.
	"decision": "require_approval",
	"rule": "svc.policy/agent_delete_budget",
	"reason": sprintf("agent delete budget exceeded: %v prior + %v requested > limit %v", [prior, n, limit]),
} if {
	input.envelope.action.verb == "delete"
	n := input.envelope.magnitude.count
	n > 0
	prior := input.cumulative.agent.deletes
	limit := data.svc.agent_thresholds.deletes
	prior + n > limit
	not observed["svc.policy/agent_delete_budget"]
} else := {
	"decision": "require_approval",
	"rule": "svc.policy/agent_cumulative_budget",
	"reason": sprintf("agent external send budget exceeded: %v prior + %v requested > limit %v", [prior, n, limit]),
} if {
	input.envelope.axes.externality == "outbound"
	n := input.envelope.magnitude.count
	n > 0
	prior := input.cumulative.agent.external_sends
	limit := data.svc.agent_thresholds.external_sends
	prior + n > limit
	not observed["svc.policy/agent_cumulative_budget"]
} else := {
	"decision": "require_approval",
	"rule": "svc.policy/agent_cumulative_budget",
	"reason": sprintf("agent object budget exceeded: %v prior + %v requested > limit %v", [prior, n, limit]),
} if {
	n := input.envelope.magnitude.count
	prior := input.cumulative.agent.objects
	limit := data.svc.agent_thresholds.objects
	prior + n > limit
	n > 0
	not observed["svc.policy/agent_cumulative_budget"]
} else := {
	"decision": "require_approval",
	"rule": "svc.policy/agent_money_budget",
	"reason": money_reason("agent", prior, m, limit),
} if {
	m := input.envelope.money
	m.units > 0
	prior := object.get(input.cumulative.agent.money, m.currency, 0)
	limit := money_limit("agent", m.currency)
	prior + m.units > limit * 10000
	not observed["svc.policy/agent_money_budget"]
} else := {
	"decision": "require_approval",
	"rule": "svc.policy/principal_delete_budget",
	"reason": sprintf("principal delete budget exceeded: %v prior + %v requested > limit %v", [prior, n, limit]),
} if {
	input.envelope.action.verb == "delete"
	input.envelope.agent.on_behalf_of != ""
	n := input.envelope.magnitude.count
	n > 0
	prior := input.cumulative.principal.deletes
	limit := data.svc.principal_thresholds.deletes
	prior + n > limit
	not observed["svc.policy/principal_delete_budget"]
} else := {
	"decision": "require_approval",
	"rule": "svc.policy/principal_cumulative_budget",
	"reason": sprintf("principal external send budget exceeded: %v prior + %v requested > limit %v", [prior, n, limit]),
} if {
	input.envelope.axes.externality == "outbound"
	input.envelope.agent.on_behalf_of != ""
	n := input.envelope.magnitude.count
	n > 0
	prior := input.cumulative.principal.external_sends
	limit := data.svc.principal_thresholds.external_sends
	prior + n > limit
	not observed["svc.policy/principal_cumulative_budget"]
} else := {
	"decision": "require_approval",
	"rule": "svc.policy/principal_cumulative_budget",
	"reason": sprintf("principal object budget exceeded: %v prior + %v requested > limit %v", [prior, n, limit]),
} if {
	n := input.envelope.magnitude.count
	prior := input.cumulative.principal.objects
	limit := data.svc.principal_thresholds.objects
	prior + n > limit
	n > 0
	input.envelope.agent.on_behalf_of != ""
	not observed["svc.policy/principal_cumulative_budget"]
} else := {
	"decision": "require_approval",
	"rule": "svc.policy/principal_money_budget",
	"reason": money_reason("principal", prior, m, limit),
} if {
	m := input.envelope.money
	m.units > 0
	input.envelope.agent.on_behalf_of != ""
	prior := object.get(input.cumulative.principal.money, m.currency, 0)
	limit := money_limit("principal", m.currency)
	prior + m.units > limit * 10000
	not observed["svc.policy/principal_money_budget"]
} else := {
	"decision": "allow",
	"rule": "svc.policy/read_only_internal",
	"reason": "internal read-only action",
} if {
	input.envelope.action.verb == "read"
	input.envelope.axes.externality == "internal"
	not observed["svc.policy/read_only_internal"]
} else := {
	"decision": "allow",
	"rule": "svc.policy/default_allow",
	"reason": "no restricting rule matched",
}

# valid_input holds when frozen is a boolean, every enumerated field holds
# one of its canonical values, action_words is an array, magnitude.count is
# a non-negative integer and the cumulative document is well formed
# (cumulative_grammar), and the envelope's money is. It runs for every
# decision, so each test is one expression: set membership against a
# literal, and one regular expression over the cumulative document's JSON
# text rather than a Rego test per total (each builtin call costs OPA about
# as much as the whole match).
valid_input if {
	is_boolean(input.frozen)
	e := input.envelope
	e.action.verb in {"read", "create", "update", "delete", "execute", "transact", "emit"}
	e.target.environment in {"production", "staging", "dev"}
	a := e.axes
	a.reversibility in {"reversible", "recoverable", "irreversible"}
	a.blast_radius in {"single", "scoped", "broad", "systemic"}
	a.externality in {"internal", "outbound", "physical"}
	is_array(input.action_words)
	n := e.magnitude.count
	n >= 0
	is_number(n)
	n == round(n)
	regex.match(cumulative_grammar, json.marshal(input.cumulative))
	valid_money
}

# cumulative_grammar is the grammar of the cumulative document's JSON text
# (OPA writes members sorted, without spaces): the totals of the session at
# the top level and of its agent and principal, each {"deletes": n,
# "external_sends": n, "money": {currency: n, ...}, "objects": n}, and
# window_seconds, n a non-negative whole number (20, 20.0, 2e1). No other
# member is allowed. A literal, composed from its parts in grammar_test.rego.
cumulative_grammar := `^\{"agent":\{"deletes":[0-9]+(?:\.0+)?(?:[eE]\+?[0-9]+)?,"external_sends":[0-9]+(?:\.0+)?(?:[eE]\+?[0-9]+)?,"money":\{(?:"(?:[^"\\]|\\.)*":[0-9]+(?:\.0+)?(?:[eE]\+?[0-9]+)?(?:,"(?:[^"\\]|\\.)*":[0-9]+(?:\.0+)?(?:[eE]\+?[0-9]+)?)*)?\},"objects":[0-9]+(?:\.0+)?(?:[eE]\+?[0-9]+)?\},"deletes":[0-9]+(?:\.0+)?(?:[eE]\+?[0-9]+)?,"external_sends":[0-9]+(?:\.0+)?(?:[eE]\+?[0-9]+)?,"money":\{(?:"(?:[^"\\]|\\.)*":[0-9]+(?:\.0+)?(?:[eE]\+?[0-9]+)?(?:,"(?:[^"\\]|\\.)*":[0-9]+(?:\.0+)?(?:[eE]\+?[0-9]+)?)*)?\},"objects":[0-9]+(?:\.0+)?(?:[eE]\+?[0-9]+)?,"principal":\{"deletes":[0-9]+(?:\.0+)?(?:[eE]\+?[0-9]+)?,"external_sends":[0-9]+(?:\.0+)?(?:[eE]\+?[0-9]+)?,"money":\{(?:"(?:[^"\\]|\\.)*":[0-9]+(?:\.0+)?(?:[eE]\+?[0-9]+)?(?:,"(?:[^"\\]|\\.)*":[0-9]+(?:\.0+)?(?:[eE]\+?[0-9]+)?)*)?\},"objects":[0-9]+(?:\.0+)?(?:[eE]\+?[0-9]+)?\}(?:,"window_seconds":[0-9]+)?\}$`

# valid_money holds when the envelope moves no money, or its amount is a
# non-negative integer count of units (1/10 000) in a currency code.
valid_money if {
	not input.envelope.money
}

valid_money if {
	m := input.envelope.money
	count_ok(m.units)
	is_string(m.currency)
	is_string(m.amount)
	is_string(m.raw_currency)
}

# count_ok holds when x is a non-negative integer.
count_ok(x) if {
	is_number(x)
	x >= 0
	x == round(x)
}

# precomputed is every value of the pack that depends on its data alone:
# OPA would compute each anew for every query. When svc's supervised OPA
# server runs a pack that cannot change while it runs (the bundled pack,
# which it does not watch), svc evaluates precomputed once, with opa eval,
# before it starts the server, which then loads the result beside the pack
# as data.svc_internal.precomputed (engine/opa/precomputed.go). Each value
# below is read from there when it is present and of its type, else
# computed: with a pack of your own (SVC_POLICY_DIR, reloaded when it
# changes), eval mode, an external OPA or opa test there is no such data.
precomputed := {
	"data_valid": data_valid,
	"sensitive_json": sensitive_json,
	"all_fragments": all_fragments,
}

# data_valid tells whether the pack's data passes its checks: the budget
# limits (valid_thresholds) and the sensitive-action tables
# (valid_sensitive). They depend on data alone, yet OPA evaluates them anew
# for every query without precomputed; svc's batch query
# (engine/opa/batch.go) evaluates data_valid once for a whole batch of
# decisions and, when it is true, tells each decision of the batch so with
# input.data_checked, sparing each its own check. svc sends no such member
# itself: a query without it (eval mode, an external OPA, replay, a single
# decision) checks the data, unless precomputed found it valid.
data_valid if {
	precomputed_valid
} else if {
	valid_thresholds
	valid_sensitive
} else := false

# precomputed_valid holds when the precomputed data checks passed.
precomputed_valid if data.svc_internal.precomputed.data_valid == true

# thresholds_ok and sensitive_ok hold when the batch query or precomputed
# found the data valid, else when their own check passes.
thresholds_ok if {
	input.data_checked == true
} else if {
	precomputed_valid
} else if {
	valid_thresholds
}

sensitive_ok if {
	input.data_checked == true
} else if {
	precomputed_valid
} else if {
	valid_sensitive
}

# valid_thresholds holds when each budget limit is a non-negative whole
# number: thresholds deletes, external_sends and objects per session, agent
# and principal, and the money limits of each scope (a default and per-
# currency overrides). It runs for every decision, so rather than testing
# each limit in Rego it checks the JSON text of the limits (OPA writes
# members sorted, without spaces) with one regular expression, in native
# code. No other members are allowed: a misspelt one is an error, not
# silently ignored.
valid_thresholds if regex.match(limits_grammar, json.marshal([
	data.svc.thresholds,
	data.svc.agent_thresholds,
	data.svc.principal_thresholds,
	data.svc.money.session,
	data.svc.money.agent,
	data.svc.money.principal,
]))

# limits_grammar is the grammar of that text: three {"deletes": n,
# "external_sends": n, "objects": n} then three {"currencies": {code: n,
# ...}, "default": n}, n a non-negative whole number (20, 20.0, 2e1). A
# literal, composed from its parts in grammar_test.rego.
limits_grammar := `^\[\{"deletes":[0-9]+(?:\.0+)?(?:[eE]\+?[0-9]+)?,"external_sends":[0-9]+(?:\.0+)?(?:[eE]\+?[0-9]+)?,"objects":[0-9]+(?:\.0+)?(?:[eE]\+?[0-9]+)?\},\{"deletes":[0-9]+(?:\.0+)?(?:[eE]\+?[0-9]+)?,"external_sends":[0-9]+(?:\.0+)?(?:[eE]\+?[0-9]+)?,"objects":[0-9]+(?:\.0+)?(?:[eE]\+?[0-9]+)?\},\{"deletes":[0-9]+(?:\.0+)?(?:[eE]\+?[0-9]+)?,"external_sends":[0-9]+(?:\.0+)?(?:[eE]\+?[0-9]+)?,"objects":[0-9]+(?:\.0+)?(?:[eE]\+?[0-9]+)?\},\{"currencies":\{(?:"(?:[^"\\]|\\.)*":[0-9]+(?:\.0+)?(?:[eE]\+?[0-9]+)?(?:,"(?:[^"\\]|\\.)*":[0-9]+(?:\.0+)?(?:[eE]\+?[0-9]+)?)*)?\},"default":[0-9]+(?:\.0+)?(?:[eE]\+?[0-9]+)?\},\{"currencies":\{(?:"(?:[^"\\]|\\.)*":[0-9]+(?:\.0+)?(?:[eE]\+?[0-9]+)?(?:,"(?:[^"\\]|\\.)*":[0-9]+(?:\.0+)?(?:[eE]\+?[0-9]+)?)*)?\},"default":[0-9]+(?:\.0+)?(?:[eE]\+?[0-9]+)?\},\{"currencies":\{(?:"(?:[^"\\]|\\.)*":[0-9]+(?:\.0+)?(?:[eE]\+?[0-9]+)?(?:,"(?:[^"\\]|\\.)*":[0-9]+(?:\.0+)?(?:[eE]\+?[0-9]+)?)*)?\},"default":[0-9]+(?:\.0+)?(?:[eE]\+?[0-9]+)?\}\]$`

# money_limit is the money limit of scope (session, agent, principal) in
# currency cur, in whole currency units: its override, else the default.
money_limit(scope, cur) := l if {
	l := data.svc.money[scope].currencies[cur]
} else := data.svc.money[scope].default

# money_reason explains a money budget exceeded, in currency units.
money_reason(scope, prior, m, limit) := sprintf("%v money budget exceeded: %v prior + %v requested > limit %v %v", [scope, units_text(prior), m.amount, limit, m.currency])

# units_text writes units of 1/10 000 as a decimal: 40005000 is 4000.5.
units_text(u) := sprintf("%d", [u / 10000]) if {
	u % 10000 == 0
} else := t if {
	frac := trim_right(sprintf("%04d", [u % 10000]), "0")
	t := sprintf("%d.%s", [floor(u / 10000), frac])
}

# charge is what the action being decided adds to its session's totals
# (engine.ChargeOf computes the same). The budget branches of decision test
# the same conditions inline; policy_test.rego checks that they agree.
charge := {
	"deletes": delete_charge,
	"external_sends": outbound_charge,
	"objects": input.envelope.magnitude.count,
	"money": money_charge,
}

money_charge := {m.currency: m.units} if {
	m := input.envelope.money
	m.units > 0
} else := {}

delete_charge := input.envelope.magnitude.count if {
	input.envelope.action.verb == "delete"
} else := 0

outbound_charge := input.envelope.magnitude.count if {
	input.envelope.axes.externality == "outbound"
} else := 0

# --- sensitive actions (data.svc.sensitive) ---
#
# Each table names a kind of sensitive action: the words that mark it
# (words: equal to one of input.action_words; fragments: contained in one,
# so grantadminrole holds admin), the canonical verbs that mark it whatever
# the words (verbs), the verdict per environment (verdicts; an environment
# not listed reads require_approval) and the obligations an action it
# matches carries. A read is never sensitive. Each table is matched with
# two regular expressions (OPA caches their compiled forms across queries)
# rather than term by term: every decision pays for the matching.

# action_text is the action's words, each between spaces.
action_text := concat("", [" ", concat(" ", input.action_words), " "])

# sensitive_matches maps each table the action matches to the table. Most
# actions match none: sensitive_candidate rules them out with one regular
# expression before any table is looked at.
sensitive_matches[name] := t if {
	input.envelope.action.verb != "read"
	sensitive_candidate
	some name, t in data.svc.sensitive
	sensitive_match(t)
}

# sensitive_candidate holds when some table could match the action: a word
# of the action is a quoted string in sensitive_json (a word of a table, or
# another string: the test only has to let every match through), a
# fragment of a table is in one of its words, or a table's verbs list its
# verb. Each test is one native call over the JSON text, so the check costs
# about the same whatever the number of tables and terms.
sensitive_candidate if {
	some w in input.action_words
	contains(sensitive_json, concat("", [`"`, w, `"`]))
}

sensitive_candidate if regex.match(all_fragments, action_text)

sensitive_candidate if regex.match(concat("", [`"verbs":\[[^\]]*"`, input.envelope.action.verb, `"`]), sensitive_json)

# all_fragments is the fragments of every table as one alternation (""
# when there are none, which matches everything: the tables then decide).
# tables_grammar guarantees them lower-case letters and digits.
all_fragments := f if {
	f := data.svc_internal.precomputed.all_fragments
	is_string(f)
} else := replace(concat(`","`, [l[1] | some l in regex.find_all_string_submatch_n(`"fragments":\["([^\]]+)"\]`, sensitive_json, -1)]), `","`, "|")

sensitive_match(t) if {
	words := object.get(t, "words", [])
	count(words) > 0
	regex.match(concat("", [" (?:", concat("|", words), ") "]), action_text)
}

sensitive_match(t) if {
	fragments := object.get(t, "fragments", [])
	count(fragments) > 0
	regex.match(concat("|", fragments), action_text)
}

sensitive_match(t) if input.envelope.action.verb in object.get(t, "verbs", [])

# sensitive_rank orders the non-allow verdicts, strictest first.
sensitive_rank := {"deny": 0, "require_approval": 1}

# sensitive_verdict(skip) is the strictest verdict of the matched tables
# whose rule is not skipped, when it is not allow.
sensitive_verdict := {
	"decision": d,
	"rule": rule,
	"reason": sprintf("sensitive action (%s: %s) in %s: %s", [t.description, concat(", ", matched_terms(t)), env, d]),
} if {
	env := input.envelope.target.environment
	ranked := sort([[rank, name] |
		some name, t in sensitive_matches
		not observed[concat("", ["svc.policy/sensitive_", name])]
		rank := sensitive_rank[object.get(t.verdicts, env, "require_approval")]
	])
	count(ranked) > 0
	name := ranked[0][1]
	t := sensitive_matches[name]
	d := object.get(t.verdicts, env, "require_approval")
	rule := concat("", ["svc.policy/sensitive_", name])
}

# matched_terms(t) are the words, fragments and verbs of table t the action
# matched, for the reason.
matched_terms(t) := sort((({w | some w in input.action_words; w in object.get(t, "words", [])} | {f | some f in object.get(t, "fragments", []); contains(action_text, f)}) | {v | v := input.envelope.action.verb; v in object.get(t, "verbs", [])}))

# sensitive_obligations are the obligations of every table matched.
sensitive_obligations := [o | some t in sensitive_matches; some o in object.get(t, "obligations", [])]

# valid_sensitive holds when data.svc.sensitive is an object of tables,
# each with a description; words of lower-case letters and digits;
# fragments of at least 4 of them; canonical verbs; at least one word,
# fragment or verb; a verdict per canonical environment among allow, deny
# and require_approval; string obligations; and no other member. A
# malformed table would silently match nothing (a misspelt "fragment"
# list, say): it denies every non-read decision instead
# (invalid_thresholds). This runs for every non-read decision, so the JSON
# text of the tables is checked by regular expressions, in native code,
# rather than table by table in Rego.
valid_sensitive if {
	regex.match(tables_grammar, sensitive_json)
	not regex.match(termless_table, sensitive_json)
}

# termless_table matches, in text that follows tables_grammar, a table
# without a word, fragment or verb.
termless_table := `\{"description":"(?:[^"\\]|\\.)*"(?:,"fragments":\[\])?(?:,"obligations":\[(?:"(?:[^"\\]|\\.)*"(?:,"(?:[^"\\]|\\.)*")*)?\])?(?:,"verbs":\[\])?,"verdicts":\{[^{}]*\}(?:,"words":\[\])?\}`

# sensitive_json is data.svc.sensitive as JSON text: members sorted, no
# spaces.
sensitive_json := t if {
	t := data.svc_internal.precomputed.sensitive_json
	is_string(t)
} else := json.marshal(data.svc.sensitive)

# tables_grammar is the grammar of that text (a literal, so that no query
# builds it; grammar_test.rego composes it from its parts and checks the
# two agree): an object of tables
#   {"description": string [,"fragments": [fragment, ...]]
#    [,"obligations": [string, ...]] [,"verbs": [verb, ...]]
#    ,"verdicts": {environment: verdict, ...} [,"words": [word, ...]]}
# written so that at each choice the next character decides (a one-pass
# expression, which Go's regexp matches in one linear scan): "verbs" and
# "verdicts" share their "ver", "execute" and "emit" their "e".
tables_grammar := `^\{(?:"(?:[^"\\]|\\.)*":\{"description":"(?:[^"\\]|\\.)*","(?:fragments":\[(?:"[a-z0-9]{4,}"(?:,"[a-z0-9]{4,}")*)?\],")?(?:obligations":\[(?:"(?:[^"\\]|\\.)*"(?:,"(?:[^"\\]|\\.)*")*)?\],")?ver(?:bs":\[(?:"(?:read|create|update|delete|e(?:xecute|mit)|transact)"(?:,"(?:read|create|update|delete|e(?:xecute|mit)|transact)")*)?\],"ver)?dicts":\{(?:"(?:production|staging|dev)":"(?:allow|deny|require_approval)"(?:,"(?:production|staging|dev)":"(?:allow|deny|require_approval)")*)?\}(?:,"words":\[(?:"[a-z0-9]+"(?:,"[a-z0-9]+")*)?\])?\}(?:,"(?:[^"\\]|\\.)*":\{"description":"(?:[^"\\]|\\.)*","(?:fragments":\[(?:"[a-z0-9]{4,}"(?:,"[a-z0-9]{4,}")*)?\],")?(?:obligations":\[(?:"(?:[^"\\]|\\.)*"(?:,"(?:[^"\\]|\\.)*")*)?\],")?ver(?:bs":\[(?:"(?:read|create|update|delete|e(?:xecute|mit)|transact)"(?:,"(?:read|create|update|delete|e(?:xecute|mit)|transact)")*)?\],"ver)?dicts":\{(?:"(?:production|staging|dev)":"(?:allow|deny|require_approval)"(?:,"(?:production|staging|dev)":"(?:allow|deny|require_approval)")*)?\}(?:,"words":\[(?:"[a-z0-9]+"(?:,"[a-z0-9]+")*)?\])?\})*)?\}$`
