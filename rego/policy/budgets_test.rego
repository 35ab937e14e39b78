# The money budget (R5) and the budgets per agent and per principal.
package svc.policy_test

import data.svc.policy

money(amount, units, cur, raw) := {"envelope": {"money": {"amount": amount, "units": units, "currency": cur, "raw_currency": raw}}}

transfer(amount, units, cur) := object.union(
	act("transact", "dev", "reversible", "single", "outbound", 1),
	money(amount, units, cur, cur),
)

spent(scope, usage) := {"cumulative": {scope: usage}} if scope != "session"

spent("session", usage) := {"cumulative": usage}

# --- session money budget ---

test_money_within_limit_allowed if {
	expect(transfer("4000", 40000000, "EUR"), "allow", "svc.policy/default_allow")
}

test_money_at_limit_allowed if {
	expect(object.union(transfer("1000", 10000000, "EUR"), {"cumulative": {"money": {"EUR": 40000000}}}), "allow", "svc.policy/default_allow")
}

test_money_over_limit_held if {
	d := decide(object.union(transfer("4000", 40000000, "EUR"), {"cumulative": {"money": {"EUR": 40000000}}}))
	d.decision == "require_approval"
	d.rule == "svc.policy/session_money_budget"
	d.reason == "session money budget exceeded: 4000 prior + 4000 requested > limit 5000 EUR"
}

test_money_over_limit_by_a_fraction_held if {
	# 4999.9999 prior + 0.0002 requested: exact integer units, no float drift.
	d := decide(object.union(transfer("0.0002", 2, "EUR"), {"cumulative": {"money": {"EUR": 49999999}}}))
	d.rule == "svc.policy/session_money_budget"
	d.reason == "session money budget exceeded: 4999.9999 prior + 0.0002 requested > limit 5000 EUR"
}

test_money_one_unit_to_the_limit_allowed if {
	expect(object.union(transfer("0.0001", 1, "EUR"), {"cumulative": {"money": {"EUR": 49999999}}}), "allow", "svc.policy/default_allow")
}

test_money_single_amount_over_limit_held if {
	expect(transfer("5000.0001", 50000001, "EUR"), "require_approval", "svc.policy/session_money_budget")
}

test_money_currency_override if {
	expect(transfer("700000", 7000000000, "JPY"), "allow", "svc.policy/default_allow")
	expect(transfer("750001", 7500010000, "JPY"), "require_approval", "svc.policy/session_money_budget")
}

test_money_limits_are_data if {
	d := decide(transfer("11", 110000, "USD")) with data.svc.money.session as {"default": 10, "currencies": {}}
	d.reason == "session money budget exceeded: 0 prior + 11 requested > limit 10 USD"
}

test_money_unknown_currency_held if {
	every raw in ["", " ", "eur0", "XXX"] {
		d := decide(object.union(act("transact", "dev", "reversible", "single", "outbound", 1), money("1", 10000, "XXX", raw)))
		d.decision == "require_approval"
		d.rule == "svc.policy/session_money_budget"
		d.reason == sprintf("amount 1 without a known ISO 4217 currency (sent %q): approval required", [raw])
	}
}

test_money_unknown_currency_held_whatever_the_verb if {
	expect(object.union(base, money("1", 10000, "XXX", "")), "require_approval", "svc.policy/session_money_budget")
}

test_transaction_without_amount_held if {
	d := decide(act("transact", "dev", "reversible", "single", "internal", 1))
	d.decision == "require_approval"
	d.rule == "svc.policy/session_money_budget"
	d.reason == "a transaction without params.amount cannot be counted against the money budget: approval required"
}

test_money_mixed_currencies_held if {
	d := decide(object.union(transfer("10", 100000, "USD"), {"cumulative": {"money": {"EUR": 40000000, "GBP": 10000}}}))
	d.decision == "require_approval"
	d.rule == "svc.policy/session_money_budget"
	d.reason == "session already moved money in EUR, GBP: a first amount in USD requires approval"
}

test_money_same_currency_not_mixed if {
	expect(object.union(transfer("10", 100000, "USD"), {"cumulative": {"money": {"USD": 10000}}}), "allow", "svc.policy/default_allow")
}

test_money_zero_amount_free if {
	expect(object.union(transfer("0", 0, "USD"), {"cumulative": {"money": {"EUR": 40000000}}}), "allow", "svc.policy/default_allow")
}

test_money_after_count_budgets if {
	p := object.union(transfer("6000", 60000000, "EUR"), {"cumulative": {"external_sends": 50}})
	expect(p, "require_approval", "svc.policy/cumulative_budget")
}

test_charge_money if {
	charge_of(transfer("4000.5", 40005000, "EUR")).money == {"EUR": 40005000}
	charge_of(transfer("0", 0, "EUR")).money == {}
}

# --- agent and principal budgets ---

usage(deletes, sends, objects) := {"deletes": deletes, "external_sends": sends, "objects": objects, "money": {}}

test_agent_delete_budget_held if {
	d := decide(object.union(act("delete", "dev", "reversible", "single", "internal", 1), spent("agent", usage(20, 0, 20))))
	d.decision == "require_approval"
	d.rule == "svc.policy/agent_delete_budget"
	d.reason == "agent delete budget exceeded: 20 prior + 1 requested > limit 20"
}

test_agent_delete_budget_at_limit_allowed if {
	expect(object.union(act("delete", "dev", "reversible", "single", "internal", 1), spent("agent", usage(19, 0, 19))), "allow", "svc.policy/default_allow")
}

test_agent_send_budget_held if {
	d := decide(object.union(act("emit", "dev", "reversible", "single", "outbound", 5), spent("agent", usage(0, 96, 96))))
	d.rule == "svc.policy/agent_cumulative_budget"
	d.reason == "agent external send budget exceeded: 96 prior + 5 requested > limit 100"
}

test_agent_object_budget_held if {
	d := decide(object.union(act("read", "dev", "reversible", "single", "internal", 5), spent("agent", usage(0, 0, 999))))
	d.rule == "svc.policy/agent_cumulative_budget"
	d.reason == "agent object budget exceeded: 999 prior + 5 requested > limit 1000"
}

test_agent_money_budget_held if {
	p := object.union(transfer("4000", 40000000, "EUR"), spent("agent", {"deletes": 0, "external_sends": 0, "objects": 0, "money": {"EUR": 70000000}}))
	d := decide(p)
	d.rule == "svc.policy/agent_money_budget"
	d.reason == "agent money budget exceeded: 7000 prior + 4000 requested > limit 10000 EUR"
}

test_session_budget_checked_before_agent if {
	p := object.union(
		object.union(act("delete", "dev", "reversible", "single", "internal", 1), prior(20, 0, 0)),
		spent("agent", usage(20, 0, 0)),
	)
	expect(p, "require_approval", "svc.policy/session_delete_budget")
}

test_principal_delete_budget_held if {
	d := decide(object.union(act("delete", "dev", "reversible", "single", "internal", 1), spent("principal", usage(40, 0, 40))))
	d.rule == "svc.policy/principal_delete_budget"
	d.reason == "principal delete budget exceeded: 40 prior + 1 requested > limit 40"
}

test_principal_send_and_object_budgets_held if {
	expect(object.union(act("emit", "dev", "reversible", "single", "outbound", 1), spent("principal", usage(0, 200, 0))), "require_approval", "svc.policy/principal_cumulative_budget")
	expect(object.union(act("update", "dev", "reversible", "single", "internal", 1), spent("principal", usage(0, 0, 2000))), "require_approval", "svc.policy/principal_cumulative_budget")
}

test_principal_money_budget_held if {
	p := object.union(transfer("4000", 40000000, "EUR"), spent("principal", {"deletes": 0, "external_sends": 0, "objects": 0, "money": {"EUR": 170000000}}))
	expect(p, "require_approval", "svc.policy/principal_money_budget")
}

test_no_principal_no_principal_budget if {
	p := act("update", "dev", "reversible", "single", "internal", 11)
	limits := {"deletes": 1, "external_sends": 1, "objects": 10}
	d := decide(object.union(p, {"envelope": {"agent": {"on_behalf_of": ""}}})) with data.svc.principal_thresholds as limits
	d.rule == "svc.policy/default_allow"
	e := decide(p) with data.svc.principal_thresholds as limits
	e.rule == "svc.policy/principal_cumulative_budget"
}

test_agent_and_principal_limits_are_data if {
	p := object.union(act("delete", "dev", "reversible", "single", "internal", 3), {})
	d := decide(p) with data.svc.agent_thresholds as {"deletes": 2, "external_sends": 100, "objects": 1000}
	d.rule == "svc.policy/agent_delete_budget"
	e := decide(p) with data.svc.principal_thresholds as {"deletes": 2, "external_sends": 100, "objects": 1000}
	e.rule == "svc.policy/principal_delete_budget"
}

# --- malformed money and spending fail closed ---

test_invalid_money_denied if {
	every patch in [
		money("1", -1, "EUR", "EUR"),
		money("1", 0.5, "EUR", "EUR"),
		money("1", "10000", "EUR", "EUR"),
		money("1", 10000, null, "EUR"),
		{"cumulative": {"money": {"EUR": -1}}},
		{"cumulative": {"money": []}},
		{"cumulative": {"agent": {"deletes": -1}}},
		{"cumulative": {"principal": {"money": null}}},
	] {
		expect(patch, "deny", "svc.policy/invalid_input")
	}
	d := policy.decision with input as json.remove(base, ["cumulative/agent"])
	d.rule == "svc.policy/invalid_input"
}

test_invalid_money_limits_denied if {
	every l in [
		{"default": -1, "currencies": {}},
		{"default": 10.5, "currencies": {}},
		{"default": 10, "currencies": {"EUR": "5"}},
		{"default": 10},
	] {
		d := decide({}) with data.svc.money.agent as l
		d.rule == "svc.policy/invalid_thresholds"
	}
	d := decide({}) with data.svc.principal_thresholds as {"deletes": 1}
	d.rule == "svc.policy/invalid_thresholds"
}
