# Package svc.policy is the bundled svc policy pack. Its entry point,
# decision, maps the policy input document (the canonical envelope, the
# session's prior cumulative totals and the kill-switch flag) to exactly one
# verdict {"decision", "rule", "reason"}. The rules form one else-chain, so
# the first that matches wins and decision is defined for every input.
# Budget limits are read from data.svc.thresholds (data.json beside this
# file) so operators tune them without editing Rego.
#
# svc evaluates this pack for every decision, so it is written to be cheap
# in OPA's evaluator, where every expression, rule and function call costs:
#   - a branch whose body starts with input.<field> == "<constant>" tests is
#     skipped by OPA's rule index, unevaluated, when the input does not match;
#   - verdicts are object literals and the budget checks plain comparisons:
#     no function calls, no every/some loops on the way to a verdict;
#   - the validity guards read each input field once into a local variable.
# Keep to these when adding a rule (docs/policy.md).
package svc.policy

# canonical is the closed set of canonical values of each enumerated input
# field (engine/canonical.go folds the raw values into them).
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

decision := {
	"decision": "deny",
	"rule": "svc.policy/invalid_input",
	"reason": "policy input is malformed or carries a non-canonical value",
} if {
	not valid_input
} else := {
	"decision": "deny",
	"rule": "svc.policy/invalid_thresholds",
	"reason": "budget thresholds in data.svc.thresholds are missing or invalid",
} if {
	not valid_thresholds
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
} else := {
	"decision": "require_approval",
	"rule": "svc.policy/irreversible_broad_prod",
	"reason": "irreversible action with broad blast radius in production requires approval",
} if {
	input.envelope.axes.reversibility == "irreversible"
	input.envelope.axes.blast_radius == "broad"
	input.envelope.target.environment == "production"
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
} else := {
	"decision": "allow",
	"rule": "svc.policy/read_only_internal",
	"reason": "internal read-only action",
} if {
	input.envelope.action.verb == "read"
	input.envelope.axes.externality == "internal"
} else := {
	"decision": "allow",
	"rule": "svc.policy/default_allow",
	"reason": "no restricting rule matched",
}

# valid_input holds when frozen is a boolean, every enumerated field holds
# one of its canonical values, and magnitude.count and the cumulative totals
# are non-negative integers (a number, at least 0, equal to its rounding).
valid_input if {
	is_boolean(input.frozen)
	k := canonical
	e := input.envelope
	k.verb[e.action.verb]
	k.environment[e.target.environment]
	a := e.axes
	k.reversibility[a.reversibility]
	k.blast_radius[a.blast_radius]
	k.externality[a.externality]
	n := e.magnitude.count
	c := input.cumulative
	d := c.deletes
	s := c.external_sends
	o := c.objects
	is_number(n)
	is_number(d)
	is_number(s)
	is_number(o)
	n >= 0
	d >= 0
	s >= 0
	o >= 0
	n == round(n)
	d == round(d)
	s == round(s)
	o == round(o)
}

# valid_thresholds holds when each budget limit is a non-negative integer.
valid_thresholds if {
	t := data.svc.thresholds
	d := t.deletes
	s := t.external_sends
	o := t.objects
	is_number(d)
	is_number(s)
	is_number(o)
	d >= 0
	s >= 0
	o >= 0
	d == round(d)
	s == round(s)
	o == round(o)
}

# charge is what the action being decided adds to its session's totals
# (engine.ChargeOf computes the same). The budget branches of decision test
# the same conditions inline; policy_test.rego checks that they agree.
charge := {
	"deletes": delete_charge,
	"external_sends": outbound_charge,
	"objects": input.envelope.magnitude.count,
}

delete_charge := input.envelope.magnitude.count if {
	input.envelope.action.verb == "delete"
} else := 0

outbound_charge := input.envelope.magnitude.count if {
	input.envelope.axes.externality == "outbound"
} else := 0
