# The regular expressions policy.rego checks the JSON text of its data with
# are literals, so that no query pays for building them: here they are
# composed from their parts, readably, and checked against the literals.
# Edit the parts here, then paste the composition into policy.rego
# (opa eval -d rego/policy data.svc.grammar_test.tables_grammar).
package svc.grammar_test

import data.svc.policy

# json_string is the grammar of a JSON string; whole_number that of a non-
# negative whole number (20, 20.0, 2e1).
json_string := `"(?:[^"\\]|\\.)*"`

whole_number := `[0-9]+(?:\.0+)?(?:[eE]\+?[0-9]+)?`

limits_grammar := concat("", ["^\\[", counted, ",", counted, ",", counted, ",", money_limits, ",", money_limits, ",", money_limits, "\\]$"]) if {
	counted := concat(whole_number, [`\{"deletes":`, `,"external_sends":`, `,"objects":`, `\}`])
	money_limits := concat("", [`\{"currencies":\{(?:`, json_string, ":", whole_number, "(?:,", json_string, ":", whole_number, `)*)?\},"default":`, whole_number, `\}`])
}

# cumulative_grammar: the session's totals at the top level, its agent's and
# its principal's in their members, and window_seconds.
cumulative_grammar := concat("", [`^\{"agent":`, usage, ",", totals, `,"principal":`, usage, `(?:,"window_seconds":[0-9]+)?\}$`]) if {
	totals := concat(whole_number, [`"deletes":`, `,"external_sends":`, concat("", [`,"money":\{(?:`, json_string, ":", whole_number, "(?:,", json_string, ":", whole_number, `)*)?\},"objects":`]), ""])
	usage := concat("", [`\{`, totals, `\}`])
}

tables_grammar := concat("", ["^\\{(?:", json_string, ":", table, "(?:,", json_string, ":", table, ")*)?\\}$"]) if {
	pair := `"(?:production|staging|dev)":"(?:allow|deny|require_approval)"`
	table := concat("", [
		`\{"description":`, json_string, `,"`,
		`(?:fragments":`, json_list(`"[a-z0-9]{4,}"`), `,")?`,
		`(?:obligations":`, json_list(json_string), `,")?`,
		`ver(?:bs":`, json_list(`"(?:read|create|update|delete|e(?:xecute|mit)|transact)"`), `,"ver)?`,
		`dicts":\{(?:`, pair, "(?:,", pair, `)*)?\}`,
		`(?:,"words":`, json_list(`"[a-z0-9]+"`), `)?\}`,
	])
}

# json_list(item) is the grammar of a JSON array of items.
json_list(item) := concat("", [`\[(?:`, item, "(?:,", item, `)*)?\]`])

# termless_table: a table whose lists of words, fragments and verbs are all
# absent or empty.
termless_table := concat("", [
	`\{"description":`, json_string, `(?:,"fragments":\[\])?(?:,"obligations":`, json_list(json_string),
	`)?(?:,"verbs":\[\])?,"verdicts":\{[^{}]*\}(?:,"words":\[\])?\}`,
])

test_grammars_are_their_composition if {
	policy.limits_grammar == limits_grammar
	policy.cumulative_grammar == cumulative_grammar
	policy.tables_grammar == tables_grammar
	policy.termless_table == termless_table
}
