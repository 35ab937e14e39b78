# Package svc.policy_test holds the opa test cases of the bundled pack: one
# or more per rule, the budget boundaries, the rule priorities, and an
# exhaustive check that decision is defined for every canonical input.
package svc.policy_test

import data.svc.policy

# base is an unremarkable update in production: it matches no restricting
# rule. Each test patches it with the fields under test.
base := {
	"envelope": {
		"agent": {"id": "agent-1", "on_behalf_of": "human:alice", "session_id": "s-1"},
		"action": {"namespace": "db", "verb": "update", "raw_verb": "modify", "ability": "db/update"},
		"target": {"kind": "table", "ref": "users", "environment": "production", "raw_environment": "prod"},
		"params": {},
		"magnitude": {"count": 1},
		"axes": {"reversibility": "reversible", "blast_radius": "single", "externality": "internal"},
		"approval": {"present": false, "hold_id": ""},
		"trajectory_ref": null,
		"context": {},
		"meta": {"timestamp": "2025-01-01T00:00:00.000Z", "nonce": "n-1", "signature": "stub"},
		"mode": "enforce",
	},
	"action_words": ["modify", "db", "update"],
	"cumulative": {
		"window_seconds": 3600, "deletes": 0, "external_sends": 0, "objects": 0, "money": {},
		"agent": {"deletes": 0, "external_sends": 0, "objects": 0, "money": {}},
		"principal": {"deletes": 0, "external_sends": 0, "objects": 0, "money": {}},
	},
	"frozen": false,
}

decide(patch) := d if {
	d := policy.decision with input as object.union(base, patch)
}

charge_of(patch) := c if {
	c := policy.charge with input as object.union(base, patch)
}

act(verb, env, rev, radius, ext, n) := {"envelope": {
	"action": {"verb": verb},
	"target": {"environment": env},
	"axes": {"reversibility": rev, "blast_radius": radius, "externality": ext},
	"magnitude": {"count": n},
}}

prior(deletes, sends, objects) := {"cumulative": {"deletes": deletes, "external_sends": sends, "objects": objects}}

expect(patch, decision, rule) if {
	d := decide(patch)
	d.decision == decision
	d.rule == rule
	is_string(d.reason)
	d.reason != ""
}

# --- default and read rules ---

test_default_allow if {
	expect({}, "allow", "svc.policy/default_allow")
}

test_read_internal_allowed if {
	expect(act("read", "production", "reversible", "single", "internal", 1), "allow", "svc.policy/read_only_internal")
}

test_read_outbound_is_default_allow if {
	expect(act("read", "dev", "reversible", "single", "outbound", 1), "allow", "svc.policy/default_allow")
}

test_read_physical_is_default_allow if {
	expect(act("read", "dev", "reversible", "single", "physical", 1), "allow", "svc.policy/default_allow")
}

# --- frozen ---

test_frozen_denies_non_read if {
	every v in ["create", "update", "delete", "execute", "transact", "emit"] {
		expect(object.union(act(v, "dev", "reversible", "single", "internal", 1), {"frozen": true}), "deny", "svc.policy/frozen")
	}
}

test_frozen_read_allowed if {
	expect(object.union(act("read", "production", "reversible", "single", "internal", 1), {"frozen": true}), "allow", "svc.policy/read_only_internal")
}

test_frozen_beats_systemic if {
	expect(object.union(act("delete", "production", "irreversible", "systemic", "internal", 1), {"frozen": true}), "deny", "svc.policy/frozen")
}

test_frozen_beats_budget if {
	patch := object.union(act("delete", "dev", "reversible", "single", "internal", 5), prior(18, 0, 0))
	expect(object.union(patch, {"frozen": true}), "deny", "svc.policy/frozen")
}

test_frozen_read_still_budgeted if {
	patch := object.union(act("read", "dev", "reversible", "single", "internal", 2), prior(0, 0, 199))
	expect(object.union(patch, {"frozen": true}), "require_approval", "svc.policy/cumulative_budget")
}

test_unfrozen_update_allowed if {
	expect({"frozen": false}, "allow", "svc.policy/default_allow")
}

# --- irreversible production rules ---

test_irreversible_systemic_prod_denied if {
	expect(act("delete", "production", "irreversible", "systemic", "internal", 1), "deny", "svc.policy/irreversible_systemic_prod")
}

test_irreversible_broad_prod_requires_approval if {
	expect(act("delete", "production", "irreversible", "broad", "internal", 1), "require_approval", "svc.policy/irreversible_broad_prod")
}

test_systemic_beats_budget if {
	patch := object.union(act("delete", "production", "irreversible", "systemic", "internal", 5), prior(18, 0, 0))
	expect(patch, "deny", "svc.policy/irreversible_systemic_prod")
}

test_broad_beats_budget if {
	patch := object.union(act("delete", "production", "irreversible", "broad", "internal", 5), prior(18, 0, 0))
	expect(patch, "require_approval", "svc.policy/irreversible_broad_prod")
}

test_prod_rules_skip_other_environments if {
	every env in ["staging", "dev"] {
		every radius in ["broad", "systemic"] {
			expect(act("delete", env, "irreversible", radius, "internal", 1), "allow", "svc.policy/default_allow")
		}
	}
}

test_prod_rules_skip_recoverable if {
	every radius in ["broad", "systemic"] {
		expect(act("delete", "production", "recoverable", radius, "internal", 1), "allow", "svc.policy/default_allow")
	}
}

test_prod_rules_skip_narrow_radius if {
	every radius in ["single", "scoped"] {
		expect(act("delete", "production", "irreversible", radius, "internal", 1), "allow", "svc.policy/default_allow")
	}
}

test_irreversible_read_systemic_prod_denied if {
	expect(act("read", "production", "irreversible", "systemic", "internal", 1), "deny", "svc.policy/irreversible_systemic_prod")
}

# --- cumulative budgets ---

test_delete_budget_at_limit_allowed if {
	expect(object.union(act("delete", "dev", "reversible", "single", "internal", 5), prior(15, 0, 0)), "allow", "svc.policy/default_allow")
}

test_delete_budget_over_limit_held if {
	d := decide(object.union(act("delete", "dev", "reversible", "single", "internal", 5), prior(16, 0, 0)))
	d.decision == "require_approval"
	d.rule == "svc.policy/session_delete_budget"
	d.reason == "session delete budget exceeded: 16 prior + 5 requested > limit 20"
}

test_delete_budget_reason_figures if {
	d := decide(object.union(act("delete", "dev", "reversible", "single", "internal", 5), prior(18, 0, 0)))
	d.reason == "session delete budget exceeded: 18 prior + 5 requested > limit 20"
}

test_delete_budget_single_action_over_limit if {
	expect(act("delete", "dev", "reversible", "single", "internal", 21), "require_approval", "svc.policy/session_delete_budget")
}

test_delete_budget_ignores_other_verbs if {
	expect(object.union(act("update", "dev", "reversible", "single", "internal", 5), prior(20, 0, 0)), "allow", "svc.policy/default_allow")
}

test_delete_budget_spent_zero_count_delete_allowed if {
	expect(object.union(act("delete", "dev", "reversible", "single", "internal", 0), prior(25, 0, 0)), "allow", "svc.policy/default_allow")
}

test_external_sends_at_limit_allowed if {
	expect(object.union(act("emit", "dev", "reversible", "single", "outbound", 10), prior(0, 40, 0)), "allow", "svc.policy/default_allow")
}

test_external_sends_over_limit_held if {
	d := decide(object.union(act("emit", "dev", "reversible", "single", "outbound", 10), prior(0, 41, 0)))
	d.decision == "require_approval"
	d.rule == "svc.policy/cumulative_budget"
	d.reason == "session external send budget exceeded: 41 prior + 10 requested > limit 50"
}

test_external_sends_ignore_internal if {
	expect(object.union(act("emit", "dev", "reversible", "single", "internal", 10), prior(0, 50, 0)), "allow", "svc.policy/default_allow")
}

test_objects_at_limit_allowed if {
	expect(object.union(act("update", "dev", "reversible", "single", "internal", 10), prior(0, 0, 190)), "allow", "svc.policy/default_allow")
}

test_objects_over_limit_held if {
	d := decide(object.union(act("update", "dev", "reversible", "single", "internal", 10), prior(0, 0, 191)))
	d.decision == "require_approval"
	d.rule == "svc.policy/cumulative_budget"
	d.reason == "session object budget exceeded: 191 prior + 10 requested > limit 200"
}

test_objects_count_reads if {
	expect(object.union(act("read", "dev", "reversible", "single", "internal", 1), prior(0, 0, 200)), "require_approval", "svc.policy/cumulative_budget")
}

test_delete_budget_checked_first if {
	d := decide(object.union(act("delete", "dev", "reversible", "single", "outbound", 30), prior(0, 50, 200)))
	d.rule == "svc.policy/session_delete_budget"
}

test_sends_checked_before_objects if {
	d := decide(object.union(act("emit", "dev", "reversible", "single", "outbound", 30), prior(0, 50, 200)))
	d.rule == "svc.policy/cumulative_budget"
	startswith(d.reason, "session external send budget exceeded")
}

test_budget_beats_read_only_internal if {
	expect(object.union(act("read", "dev", "reversible", "single", "internal", 201), prior(0, 0, 0)), "require_approval", "svc.policy/cumulative_budget")
}

test_thresholds_are_data if {
	patch := object.union(act("delete", "dev", "reversible", "single", "internal", 5), prior(0, 0, 0))
	d := decide(patch) with data.svc.thresholds as {"deletes": 4, "external_sends": 50, "objects": 200}
	d.rule == "svc.policy/session_delete_budget"
	d.reason == "session delete budget exceeded: 0 prior + 5 requested > limit 4"
}

# The budget branches of decision test the charge conditions inline. An
# action must be held by the first budget, in the order deletes,
# external_sends, objects, that it charges (charge > 0) and would take past
# its limit, and by no budget otherwise.
test_budget_verdicts_agree_with_charge if {
	limits := {"deletes": 20, "external_sends": 50, "objects": 200}
	mismatches := [[p, d] |
		some v in ["read", "update", "delete", "emit"]
		some ext in policy.externalities
		some n in [0, 1, 5]
		some pd in [15, 16, 20, 25]
		some ps in [45, 46, 50, 55]
		some po in [195, 196, 200, 205]
		p := object.union(act(v, "dev", "reversible", "single", ext, n), prior(pd, ps, po))
		d := decide(p)
		not budget_verdict_matches(d, charge_of(p), {"deletes": pd, "external_sends": ps, "objects": po}, limits)
	]
	mismatches == []
}

budget_order := ["deletes", "external_sends", "objects"]

budget_rules := {
	"deletes": "svc.policy/session_delete_budget",
	"external_sends": "svc.policy/cumulative_budget",
	"objects": "svc.policy/cumulative_budget",
}

budget_labels := {
	"deletes": "session delete budget",
	"external_sends": "session external send budget",
	"objects": "session object budget",
}

exceeded(c, totals, limits) := [name |
	some name in budget_order
	c[name] > 0
	totals[name] + c[name] > limits[name]
]

budget_verdict_matches(d, c, totals, limits) if {
	exceeded(c, totals, limits) == []
	d.decision == "allow"
}

budget_verdict_matches(d, c, totals, limits) if {
	name := exceeded(c, totals, limits)[0]
	d.decision == "require_approval"
	d.rule == budget_rules[name]
	d.reason == sprintf("%s exceeded: %v prior + %v requested > limit %v", [budget_labels[name], totals[name], c[name], limits[name]])
}

# --- charge ---

test_charge_delete_internal if {
	charge_of(act("delete", "dev", "reversible", "single", "internal", 7)) == {"deletes": 7, "external_sends": 0, "objects": 7, "money": {}}
}

test_charge_outbound_emit if {
	charge_of(act("emit", "dev", "reversible", "single", "outbound", 3)) == {"deletes": 0, "external_sends": 3, "objects": 3, "money": {}}
}

test_charge_outbound_delete if {
	charge_of(act("delete", "dev", "reversible", "single", "outbound", 2)) == {"deletes": 2, "external_sends": 2, "objects": 2, "money": {}}
}

test_charge_read if {
	charge_of(act("read", "dev", "reversible", "single", "physical", 4)) == {"deletes": 0, "external_sends": 0, "objects": 4, "money": {}}
}

# --- malformed input and configuration fail closed ---

test_invalid_input_denied if {
	every patch in [
		act("drop", "dev", "reversible", "single", "internal", 1),
		act("delete", "prod", "reversible", "single", "internal", 1),
		act("delete", "dev", "permanent", "single", "internal", 1),
		act("delete", "dev", "reversible", "huge", "internal", 1),
		act("delete", "dev", "reversible", "single", "email", 1),
		act("delete", "dev", "reversible", "single", "internal", -1),
		act("delete", "dev", "reversible", "single", "internal", 1.5),
		act("delete", "dev", "reversible", "single", "internal", "1"),
		prior(-1, 0, 0),
		prior(0, "x", 0),
		{"frozen": "yes"},
	] {
		expect(patch, "deny", "svc.policy/invalid_input")
	}
}

test_missing_or_mistyped_fields_denied if {
	every doc in [
		json.remove(base, ["frozen"]),
		json.remove(base, ["envelope/action/verb"]),
		json.remove(base, ["envelope/target"]),
		json.remove(base, ["envelope/axes/externality"]),
		json.remove(base, ["envelope/magnitude"]),
		json.remove(base, ["cumulative/objects"]),
		object.union(base, {"frozen": null}),
		object.union(base, {"envelope": {"action": {"verb": "Delete"}}}),
		object.union(base, {"envelope": {"magnitude": {"count": null}}}),
		object.union(base, {"envelope": {"magnitude": {"count": true}}}),
		object.union(base, {"envelope": {"magnitude": {"count": [1]}}}),
		object.union(base, {"cumulative": {"external_sends": 0.5}}),
		object.union(base, {"cumulative": {"objects": -2}}),
	] {
		d := policy.decision with input as doc
		d.decision == "deny"
		d.rule == "svc.policy/invalid_input"
	}
}

test_integral_numbers_accepted if {
	expect(object.union(act("delete", "dev", "reversible", "single", "internal", 2.0), prior(0.0, 0, 1e2)), "allow", "svc.policy/default_allow")
}

test_invalid_threshold_values_denied if {
	every t in [
		{"deletes": -1, "external_sends": 50, "objects": 200},
		{"deletes": 20, "external_sends": 50.5, "objects": 200},
		{"deletes": 20, "external_sends": 50, "objects": null},
		{"deletes": 20, "external_sends": true, "objects": 200},
		{"deletes": [20], "external_sends": 50, "objects": 200},
		{"deletes": 20, "external_sends": 50, "objects": 200, "object": 10}, # a misspelt member
	] {
		d := decide({}) with data.svc.thresholds as t
		d.decision == "deny"
		d.rule == "svc.policy/invalid_thresholds"
	}
}

test_invalid_input_beats_invalid_thresholds if {
	d := decide({"frozen": "yes"}) with data.svc.thresholds as {"deletes": "20", "external_sends": 50, "objects": 200}
	d.rule == "svc.policy/invalid_input"
}

test_empty_input_denied if {
	d := policy.decision with input as {}
	d.rule == "svc.policy/invalid_input"
	d.decision == "deny"
}

test_missing_cumulative_denied if {
	d := policy.decision with input as object.remove(base, ["cumulative"])
	d.rule == "svc.policy/invalid_input"
}

test_missing_thresholds_denied if {
	d := decide({}) with data.svc.thresholds as {"deletes": 20, "objects": 200}
	d.decision == "deny"
	d.rule == "svc.policy/invalid_thresholds"
}

test_non_numeric_thresholds_denied if {
	d := decide({}) with data.svc.thresholds as {"deletes": "20", "external_sends": 50, "objects": 200}
	d.rule == "svc.policy/invalid_thresholds"
}

# --- totality: one verdict for every canonical value of each field ---

test_decision_defined_for_every_environment_and_risk if {
	verdicts := [d |
		some env in policy.environments
		some rev in policy.reversibilities
		some radius in policy.blast_radii
		d := decide(act("delete", env, rev, radius, "internal", 1))
	]
	count(verdicts) == (3 * 3) * 4
	every d in verdicts {
		well_formed(d)
	}
}

test_decision_defined_for_every_externality if {
	verdicts := [d |
		some ext in policy.externalities
		some v in ["read", "emit"]
		d := decide(act(v, "production", "irreversible", "systemic", ext, 1))
	]
	count(verdicts) == 3 * 2
	every d in verdicts {
		well_formed(d)
	}
}

test_decision_defined_for_every_verb_frozen_or_not if {
	verdicts := [d |
		some v in policy.verbs
		some env in policy.environments
		some frozen in [true, false]
		d := decide(object.union(act(v, env, "irreversible", "broad", "outbound", 1), {"frozen": frozen}))
	]
	count(verdicts) == (7 * 3) * 2
	every d in verdicts {
		well_formed(d)
	}
}

well_formed(d) if {
	d.decision in {"allow", "deny", "require_approval"}
	startswith(d.rule, "svc.policy/")
	d.reason != ""
	count(d) == 5
	is_array(d.obligations)
	d.shadow == null
}

# --- the batch query's data check (engine/opa/batch.go) ---

test_data_valid_is_the_data_checks if {
	policy.data_valid == true
	policy.data_valid == false with data.svc.thresholds as {"deletes": 20, "objects": 200}
	policy.data_valid == false with data.svc.money.agent as {"default": -1, "currencies": {}}
	policy.data_valid == false with data.svc.sensitive as {"x": {"description": "x", "words": ["a"], "fragment": ["admin"], "verdicts": {}}}
}

test_data_checked_spares_the_data_checks if {
	misspelt := {"deletes": 20, "external_sends": 50, "objects": 200, "object": 10}
	d := decide({}) with data.svc.thresholds as misspelt
	d.rule == "svc.policy/invalid_thresholds"

	# The batch query adds data_checked only after data_valid held for the
	# same data; a decision told so does not check again.
	c := decide({"data_checked": true}) with data.svc.thresholds as misspelt
	c.rule == "svc.policy/default_allow"
	decide({"data_checked": false}) == d with data.svc.thresholds as misspelt
}

# --- the values svc's supervised OPA server computes once (precomputed) ---

test_precomputed_is_what_the_pack_computes if {
	policy.precomputed == {
		"data_valid": true,
		"sensitive_json": json.marshal(data.svc.sensitive),
		"all_fragments": policy.all_fragments,
	}
	contains(policy.all_fragments, "|admin|")
	policy.precomputed.data_valid == false with data.svc.thresholds as {"deletes": 20, "objects": 200}
}

test_precomputed_values_are_read_when_present if {
	misspelt := {"deletes": 20, "external_sends": 50, "objects": 200, "object": 10}
	valid := {"data_valid": true}

	# Found valid once: a decision does not check again.
	c := decide({}) with data.svc.thresholds as misspelt with data.svc_internal.precomputed as valid
	c.rule == "svc.policy/default_allow"
	policy.data_valid == true with data.svc.thresholds as misspelt with data.svc_internal.precomputed as valid

	# Not found valid, or not a boolean: each decision checks for itself.
	every p in [{"data_valid": false}, {"data_valid": "true"}, {}] {
		d := decide({}) with data.svc.thresholds as misspelt with data.svc_internal.precomputed as p
		d.rule == "svc.policy/invalid_thresholds"
	}

	# The sensitive tables as text, and their fragments, come from there
	# too: text that lists no table makes no action a candidate (which is
	# why svc computes it only for a pack that cannot change).
	grant := {"action_words": ["grant", "admin", "role"]}
	decide(grant).rule == "svc.policy/sensitive_privilege"
	none := {"data_valid": true, "sensitive_json": "{}", "all_fragments": "^$"}
	n := decide(grant) with data.svc_internal.precomputed as none
	n.rule == "svc.policy/default_allow"
}

test_precomputed_values_of_another_type_are_computed if {
	p := {"sensitive_json": 1, "all_fragments": ["admin"]}
	policy.sensitive_json == json.marshal(data.svc.sensitive) with data.svc_internal.precomputed as p
	contains(policy.all_fragments, "|admin|") with data.svc_internal.precomputed as p
}

# valid_input tests the enumerated fields against literal sets (cheaper in
# OPA than looking them up in canonical): every canonical value of each
# field must pass it, so that the two lists cannot drift apart.
test_valid_input_accepts_every_canonical_value if {
	fields := {
		"verb": ["action", "verb"],
		"environment": ["target", "environment"],
		"reversibility": ["axes", "reversibility"],
		"blast_radius": ["axes", "blast_radius"],
		"externality": ["axes", "externality"],
	}
	every field, values in policy.canonical {
		every value in values {
			policy.valid_input with input as json.patch(base, [{"op": "replace", "path": array.concat(["envelope"], fields[field]), "value": value}])
		}
	}
}
