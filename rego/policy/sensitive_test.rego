# Sensitive-action tables, obligations and observed (shadow) rules.
package svc.policy_test

import data.svc.policy

# sensitive(verb, env, words) is an internal, reversible, single action
# whose verb and ability give words.
sensitive(verb, env, words) := object.union(act(verb, env, "reversible", "single", "internal", 1), {"action_words": words})

test_privilege_change_held_in_production if {
	d := decide(sensitive("update", "production", ["grant", "iam", "admin", "role"]))
	d.decision == "require_approval"
	d.rule == "svc.policy/sensitive_privilege"
	d.reason == "sensitive action (privilege or role change: admin, grant, iam, role) in production: require_approval"
	d.obligations == ["log_params", "notify"]
}

test_each_table_held_in_production if {
	every words_rule in [
		[["disable", "mfa", "auth"], "svc.policy/sensitive_security_control"],
		[["stop", "cloudtrail", "logging"], "svc.policy/sensitive_security_control"],
		[["set", "webhooks", "endpoint"], "svc.policy/sensitive_credential"],
		[["rotate", "api", "key"], "svc.policy/sensitive_credential"],
		[["install", "wp", "plugin"], "svc.policy/sensitive_install"],
		[["create", "payout"], "svc.policy/sensitive_payment"],
	] {
		expect(sensitive("update", "production", words_rule[0]), "require_approval", words_rule[1])
	}
}

test_payment_verb_held_in_production if {
	p := object.union(sensitive("transact", "production", ["transact", "ledger"]), money("1", 10000, "EUR", "EUR"))
	expect(p, "require_approval", "svc.policy/sensitive_payment")
}

test_sensitive_allowed_outside_production_with_obligations if {
	every env in ["staging", "dev"] {
		d := decide(sensitive("update", env, ["grant", "admin"]))
		d.decision == "allow"
		d.rule == "svc.policy/default_allow"
		d.obligations == ["log_params", "notify"]
	}
}

test_sensitive_budgets_still_apply_outside_production if {
	p := object.union(sensitive("delete", "staging", ["remove", "admin"]), prior(20, 0, 0))
	expect(p, "require_approval", "svc.policy/session_delete_budget")
}

test_contained_terms_match_run_together_words if {
	expect(sensitive("update", "production", ["grantadminrole"]), "require_approval", "svc.policy/sensitive_privilege")
	expect(sensitive("update", "production", ["disablecloudtrail"]), "require_approval", "svc.policy/sensitive_security_control")
}

test_short_terms_match_whole_words_only if {
	expect(sensitive("update", "production", ["oracle", "monkey", "lasso"]), "allow", "svc.policy/default_allow")
	expect(sensitive("update", "production", ["set", "acl"]), "require_approval", "svc.policy/sensitive_privilege")
}

test_reads_never_sensitive if {
	expect(sensitive("read", "production", ["list", "iam", "roles"]), "allow", "svc.policy/read_only_internal")
}

test_strictest_table_wins if {
	# credential and privilege both match: by name, credential first
	expect(sensitive("update", "production", ["admin", "password"]), "require_approval", "svc.policy/sensitive_credential")
	d := decide(sensitive("update", "production", ["admin", "password"])) with data.svc.sensitive.privilege.verdicts.production as "deny"
	d.decision == "deny"
	d.rule == "svc.policy/sensitive_privilege"
	d.obligations == []
}

test_prod_rules_before_sensitive if {
	p := object.union(act("delete", "production", "irreversible", "systemic", "internal", 1), {"action_words": ["delete", "admin"]})
	expect(p, "deny", "svc.policy/irreversible_systemic_prod")
}

test_operators_extend_tables_without_rego if {
	tables := object.union(data.svc.sensitive, {"dns": {"description": "DNS change", "words": ["dns", "nameserver"], "verdicts": {"production": "deny", "staging": "require_approval"}}})
	d := decide(sensitive("update", "staging", ["set", "nameserver"])) with data.svc.sensitive as tables
	d.decision == "require_approval"
	d.rule == "svc.policy/sensitive_dns"
	e := decide(sensitive("update", "dev", ["set", "dns"])) with data.svc.sensitive as tables
	e.decision == "require_approval" # dev not listed: the strict default
}

test_invalid_tables_denied if {
	every t in [
		{"x": {"description": "x", "words": [], "verdicts": {}}},
		{"x": {"description": "x", "words": ["Admin"], "verdicts": {}}},
		{"x": {"description": "x", "words": ["a"], "verdicts": {"production": "hold"}}},
		{"x": {"description": "x", "words": ["a"], "verdicts": {"prod": "deny"}}},
		{"x": {"description": "x", "words": ["a"], "verbs": ["pay"], "verdicts": {}}},
		{"x": {"words": ["a"], "verdicts": {}}},
		{"x": {"description": "x", "words": ["a"], "verdicts": {}, "obligations": [1]}},
		{"x": {"description": "x", "fragments": ["abc"], "verdicts": {}}},
		{"x": {"description": "x", "words": ["a b"], "verdicts": {}}},
		{"x": {"description": "x", "words": "admin", "verdicts": {}}},
		{"x": {"description": "x", "words": ["a"], "fragment": ["admin"], "verdicts": {}}}, # a misspelt list
		{"x": {"description": "x", "words": ["a"], "verdicts": {"production": "deny"}}, "y": {"description": "y", "verdicts": {}}},
		[],
	] {
		d := decide({}) with data.svc.sensitive as t
		d.rule == "svc.policy/invalid_thresholds"
		r := decide(act("read", "production", "reversible", "single", "internal", 1)) with data.svc.sensitive as t
		r.rule == "svc.policy/read_only_internal" # reads skip the tables
	}
	d := policy.decision with input as object.remove(base, ["action_words"])
	d.rule == "svc.policy/invalid_input"
}

# --- obligations ---

test_no_obligations_by_default if {
	decide({}).obligations == []
}

test_rule_obligations_merged if {
	policy.obligations_of({"decision": "allow", "obligations": ["max_rate", "notify"]}) == ["max_rate", "notify"]
	policy.obligations_of({"decision": "deny", "obligations": ["notify"]}) == []
}

# --- observed (shadow) rules ---

test_observed_rule_not_enforced_but_shadowed if {
	d := decide(sensitive("update", "production", ["grant", "admin"])) with data.svc.observe as ["svc.policy/sensitive_privilege"]
	d.decision == "allow"
	d.rule == "svc.policy/default_allow"
	d.shadow.decision == "require_approval"
	d.shadow.rule == "svc.policy/sensitive_privilege"
}

test_observed_budget_not_enforced_but_shadowed if {
	p := object.union(act("delete", "dev", "reversible", "single", "internal", 1), prior(20, 0, 20))
	d := decide(p) with data.svc.observe as ["svc.policy/session_delete_budget"]
	d.decision == "allow"
	d.shadow.rule == "svc.policy/session_delete_budget"
	d.shadow.decision == "require_approval"
}

test_observed_rule_that_does_not_fire_has_no_shadow if {
	d := decide({}) with data.svc.observe as ["svc.policy/session_delete_budget"]
	d.rule == "svc.policy/default_allow"
	d.shadow == null
}

test_guards_cannot_be_observed if {
	d := decide(object.union(act("delete", "dev", "reversible", "single", "internal", 1), {"frozen": true})) with data.svc.observe as ["svc.policy/frozen", "svc.policy/invalid_input"]
	d.rule == "svc.policy/frozen"
	d.shadow == null
}

test_observed_rule_beneath_an_enforced_one if {
	p := act("delete", "production", "irreversible", "broad", "internal", 25)
	d := decide(p) with data.svc.observe as ["svc.policy/irreversible_broad_prod"]
	d.rule == "svc.policy/session_delete_budget"
	d.shadow.rule == "svc.policy/irreversible_broad_prod"
}

# The candidate check (one native test over the tables' JSON text) lets
# through every action a table matches: each term of each bundled table,
# alone, as a word or (fragments) inside a longer one, and each listed
# verb, matches its table; an action without a term matches none.
test_every_term_matches_its_table if {
	every name, t in data.svc.sensitive {
		every w in object.get(t, "words", []) {
			policy.sensitive_matches[name] with input as object.union(base, sensitive("update", "production", ["set", w]))
		}
		every f in object.get(t, "fragments", []) {
			policy.sensitive_matches[name] with input as object.union(base, sensitive("update", "production", [concat("", ["x", f, "y"])]))
		}
		every v in object.get(t, "verbs", []) {
			policy.sensitive_matches[name] with input as object.union(base, sensitive(v, "production", ["ledger"]))
		}
	}
	count(policy.sensitive_matches) == 0 with input as object.union(base, sensitive("update", "production", ["update", "rows"]))
	not policy.sensitive_candidate with input as object.union(base, sensitive("update", "production", ["update", "rows"]))
}
