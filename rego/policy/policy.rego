# Package svc.policy is the bundled svc policy pack. Its entry point,
# decision, maps the policy input document (the canonical envelope, the
# session's prior cumulative totals and the kill-switch flag) to exactly one
# verdict {"decision", "rule", "reason"}. The rules form one else-chain, so
# the first that matches wins and decision is defined for every input.
# Budget limits are read from data.svc.thresholds (data.json beside this
# file) so operators tune them without editing Rego.
package svc.policy

verbs := {"read", "create", "update", "delete", "execute", "transact", "emit"}

environments := {"production", "staging", "dev"}

reversibilities := {"reversible", "recoverable", "irreversible"}

blast_radii := {"single", "scoped", "broad", "systemic"}

externalities := {"internal", "outbound", "physical"}

# Budget names, in the order they are checked.
budgets := ["deletes", "external_sends", "objects"]

verb := input.envelope.action.verb

axes := input.envelope.axes

requested := input.envelope.magnitude.count

limits := data.svc.thresholds

decision := verdict("deny", "svc.policy/invalid_input", "policy input is malformed or carries a non-canonical value") if {
	not valid_input
} else := verdict("deny", "svc.policy/invalid_thresholds", "budget thresholds in data.svc.thresholds are missing or invalid") if {
	not valid_thresholds
} else := verdict("deny", "svc.policy/frozen", "svc is frozen: every non-read action is denied") if {
	input.frozen == true
	verb != "read"
} else := verdict("deny", "svc.policy/irreversible_systemic_prod", "irreversible action with systemic blast radius in production is denied") if {
	irreversible_prod("systemic")
} else := verdict("require_approval", "svc.policy/irreversible_broad_prod", "irreversible action with broad blast radius in production requires approval") if {
	irreversible_prod("broad")
} else := verdict("require_approval", over.rule, over.reason) if {
	over
} else := verdict("allow", "svc.policy/read_only_internal", "internal read-only action") if {
	verb == "read"
	axes.externality == "internal"
} else := verdict("allow", "svc.policy/default_allow", "no restricting rule matched")

verdict(d, rule, reason) := {"decision": d, "rule": rule, "reason": reason}

irreversible_prod(radius) if {
	axes.reversibility == "irreversible"
	axes.blast_radius == radius
	input.envelope.target.environment == "production"
}

# charge is what the action being decided adds to its session's totals.
charge := {
	"deletes": delete_charge,
	"external_sends": outbound_charge,
	"objects": requested,
}

delete_charge := requested if {
	verb == "delete"
} else := 0

outbound_charge := requested if {
	axes.externality == "outbound"
} else := 0

# over is the first budget the action would exceed, if any. A budget is
# exceeded only by an action that charges it, so a session already past a
# limit is not held on actions that add nothing to that budget.
over := budget_hold("svc.policy/session_delete_budget", "session delete budget", "deletes") if {
	exceeds("deletes")
} else := budget_hold("svc.policy/cumulative_budget", "session external send budget", "external_sends") if {
	exceeds("external_sends")
} else := budget_hold("svc.policy/cumulative_budget", "session object budget", "objects") if {
	exceeds("objects")
}

exceeds(name) if {
	charge[name] > 0
	input.cumulative[name] + charge[name] > limits[name]
}

budget_hold(rule, label, name) := {"rule": rule, "reason": sprintf(
	"%s exceeded: %v prior + %v requested > limit %v",
	[label, input.cumulative[name], charge[name], limits[name]],
)}

valid_input if {
	is_boolean(input.frozen)
	verb in verbs
	input.envelope.target.environment in environments
	axes.reversibility in reversibilities
	axes.blast_radius in blast_radii
	axes.externality in externalities
	amount(requested)
	every name in budgets {
		amount(input.cumulative[name])
	}
}

valid_thresholds if {
	every name in budgets {
		amount(limits[name])
	}
}

# amount holds for a non-negative integer.
amount(n) if {
	is_number(n)
	n >= 0
	n == round(n)
}
