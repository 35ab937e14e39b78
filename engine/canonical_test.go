package engine

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCanonicalEnvironment(t *testing.T) {
	cases := map[string]string{
		"production": "production", "Prod": "production", "PRODUCTION": "production", "prd": "production",
		"live": "production", " prod ": "production", "p\u200brod": "production", "ｐｒｏｄ": "production",
		"staging": "staging", "STAGE": "staging", "stg": "staging", "st\u00adaging": "staging",
		"dev": "dev", "Development": "dev", "develop": "dev", "test": "dev", "TESTING": "dev",
		"qa": "production", "": "production", "stagіng": "staging", "preprod": "production",
		"prod-eu": "production", "staging\u202e": "staging",
	}
	for raw, want := range cases {
		assert.Equal(t, want, CanonicalEnvironment(raw), "environment %q", raw)
	}
}

func TestCanonicalVerb(t *testing.T) {
	cases := []struct {
		verb, ability, reversibility, want string
	}{
		{"delete", "db/rows", "reversible", "delete"},
		{"Delete", "db/rows", "reversible", "delete"},
		{"remove", "", "reversible", "delete"},
		{"purge", "", "reversible", "delete"},
		{"rm", "", "reversible", "delete"},
		{"hard_delete", "", "reversible", "delete"},
		{"bulkDelete", "", "reversible", "delete"},
		{"HTTPDelete", "", "reversible", "delete"},
		{"de\u200blete", "", "reversible", "delete"},
		{"dеlete", "", "reversible", "delete"}, // Cyrillic е
		{"ＤＥＬＥＴＥ", "", "reversible", "delete"},
		{"get", "crm/get_customer", "reversible", "read"},
		{"list", "", "reversible", "read"},
		{"send", "", "reversible", "emit"},
		{"publish", "", "reversible", "emit"},
		{"run", "", "reversible", "execute"},
		{"deploy", "", "reversible", "execute"},
		{"pay", "", "reversible", "transact"},
		{"refund", "", "reversible", "transact"},
		{"create", "", "reversible", "create"},
		{"patch", "", "reversible", "update"},
		{"read", "db/delete_records", "reversible", "delete"},
		{"read", "mail/send_digest", "reversible", "emit"},
		{"frobnicate", "", "reversible", "update"},
		{"frobnicate", "", "recoverable", "update"},
		{"frobnicate", "", "irreversible", "delete"},
		{"get_and_delete", "", "reversible", "delete"},
		{"read", "billing/void_invoices", "irreversible", "delete"},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, CanonicalVerb(c.verb, c.ability, c.reversibility), "verb %q ability %q", c.verb, c.ability)
	}
}

func TestFoldTable(t *testing.T) {
	tests := map[string]string{
		"Agent-7":               "agent-7",
		"agent\u200b-7":         "agent-7", // zero-width space
		"agent\u00ad-7\u200d":   "agent-7", // soft hyphen, zero-width joiner
		"\ufeff agent-7 \t":     "agent-7", // BOM and spaces
		"ＡＧＥＮＴ－７":               "agent-7", // fullwidth
		"STRASSE":               "strasse",
		"Straße":                "strasse",
		"ǅ":                     "dž",
		"agent\u0007-7":         "agent-7", // control character
		"\u200b\u200c\u2060":    "",
		"human\uff1a\u0041lice": "human:alice", // fullwidth colon
		"c\u0430rol":            "carol",       // Cyrillic а
	}
	for in, want := range tests {
		assert.Equal(t, want, Fold(in), "Fold(%q)", in)
	}
}

func TestFold(t *testing.T) {
	assert.Equal(t, Fold("Agent-7"), Fold("agent-7"))
	assert.Equal(t, Fold("agent\u200b-7"), Fold("agent-7"))
	assert.Equal(t, Fold("ａｇｅｎｔ-7"), Fold("agent-7"))
	assert.Equal(t, Fold("аgent-7"), Fold("agent-7")) // Cyrillic а
	assert.Equal(t, Fold("STRASSE"), Fold("straße"))
	assert.NotEqual(t, Fold("agent-7"), Fold("agent-8"))
}
