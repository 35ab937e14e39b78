package envelope

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
		// camelCase in the ability (CanonicalVerb is given the unfolded ability).
		{"read", "db/deleteRecords", "reversible", "delete"},
		{"read", "db/dropTable", "reversible", "delete"},
		{"read", "db/DELETE_RECORDS", "reversible", "delete"},
		// A word without an alias of its own is searched for aliases of at
		// least five letters; this only ever raises the verb.
		{"read", "db/deleterecords", "reversible", "delete"},
		{"read", "db/DELETERECORDS", "reversible", "delete"},
		{"bulkdelete", "", "reversible", "delete"},
		{"harddelete", "", "reversible", "delete"},
		{"purgeall", "", "reversible", "delete"},
		{"wiretransfer", "", "reversible", "update"}, // only delete aliases are looked for inside words
		{"read", "payments/wiretransfer", "reversible", "read"},
		{"getemails", "", "reversible", "update"},
		{"read", "shop/list_orders", "reversible", "read"},
		{"read", "inbox/get_messages", "reversible", "read"},
		{"read", "crm/list_invoices", "reversible", "read"},
		{"countermand", "", "reversible", "update"},               // contains "count": a read alias never lowers
		{"countermand", "", "irreversible", "delete"},             // nor replaces the unknown-verb default
		{"read", "crm/list_accounts", "reversible", "read"},       // "count" in accounts raises nothing
		{"readnow", "", "reversible", "update"},                   // "read" is too short to be searched for
		{"read", "db/undrop", "reversible", "read"},               // so is "drop"
		{"read", "crm/format", "reversible", "read"},              // and "rm"
		{"read", "ops/rerunning", "reversible", "read"},           // and "run"
		{"read", "db/get_customer_records", "reversible", "read"}, // no alias inside customer or records
		// Invisible and look-alike characters.
		{"delete\u3164", "", "reversible", "delete"},
		{"DELETE\u3164", "", "reversible", "delete"},
		{"dele\u034fte", "", "reversible", "delete"},
		{"dele\u115fte", "", "reversible", "delete"},
		{"dele\u1160te", "", "reversible", "delete"},
		{"dele\uffa0te", "", "reversible", "delete"},
		{"delete\ufe0f", "", "reversible", "delete"},
		{"dele\u2800te", "", "reversible", "delete"},
		{"ᴅelete", "", "reversible", "delete"},
		{"ᴅᴇʟᴇᴛᴇ", "", "reversible", "delete"},
		{"d\u0335elete", "", "reversible", "delete"},
		{"de\u20ddlete", "", "reversible", "delete"}, // enclosing mark
		{"de\u0488lete", "", "reversible", "delete"},
		{"de\u0903lete", "", "reversible", "delete"}, // spacing mark
		{"read", "db/dele\u3164te_rows", "reversible", "delete"},
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

// TestCanonicalVerbThroughParse checks the verb the policy sees, through
// the real parse path: ParseEnvelope folds the stored ability, but the verb
// must be derived from the ability before folding (camelCase), from words
// run together, and from text stripped of invisible and look-alike
// characters.
func TestCanonicalVerbThroughParse(t *testing.T) {
	base := readEnvelope(t, "minimal.json")
	cases := []struct {
		verb, ability, wantVerb, wantAbility string
	}{
		{"read", "db/deleteRecords", "delete", "db/deleterecords"},
		{"read", "db/dropTable", "delete", "db/droptable"},
		{"read", "db/DELETERECORDS", "delete", "db/deleterecords"},
		{"read", "db/deleterecords", "delete", "db/deleterecords"},
		{"read", "db/delete_records", "delete", "db/delete_records"},
		{"read", "db/bulkDelete", "delete", "db/bulkdelete"},
		{"read", "payments/wireTransfer", "transact", "payments/wiretransfer"},
		{"delete\u3164", "crm/get_customer", "delete", "crm/get_customer"},
		{"DELETE\u3164", "crm/get_customer", "delete", "crm/get_customer"},
		{"dele\u034fte", "crm/get_customer", "delete", "crm/get_customer"},
		{"dele\u115fte", "crm/get_customer", "delete", "crm/get_customer"},
		{"ᴅelete", "crm/get_customer", "delete", "crm/get_customer"},
		{"d\u0335elete", "crm/get_customer", "delete", "crm/get_customer"},
		{"read", "db/dele\u3164teRows", "delete", "db/deleterows"},
		{"deleting", "crm/get_customer", "delete", "crm/get_customer"},
		{"re move", "crm/get_customer", "delete", "crm/get_customer"},
		{"d\u00e9lete", "crm/get_customer", "delete", "crm/get_customer"},
		{"read", "db/dr0pTable", "delete", "db/dr0ptable"},
		{"read", "fs/rimraf", "delete", "fs/rimraf"},
		{"read", "db/de|ete_rows", "delete", "db/de|ete_rows"},
		{"read", "db/DR0PTABLE", "delete", "db/dr0ptable"},
		{"read", "users/DELUSER", "delete", "users/deluser"},
		{"read", "fs/shutil.rmtree", "delete", "fs/shutil.rmtree"},
		{"read", "gdpr/account_deletion", "delete", "gdpr/account_deletion"},
		{"read", "users/userdel", "delete", "users/userdel"},
		{"read", "metrics/RMS", "read", "metrics/rms"},
		{"read", "aws/getLayer4Settings", "read", "aws/getlayer4settings"},
		{"read", "db/BULKD3LETE", "delete", "db/bulkd3lete"},
		{"read", "elb/describe_ssl_termination", "read", "elb/describe_ssl_termination"},
		{"read", "elb/ssl_termination", "delete", "elb/ssl_termination"},
		{"read", "redis/ZRem", "delete", "redis/zrem"},
		{"read", "py/__delattr__", "delete", "py/__delattr__"},
		{"read", "shop/DELIVERY", "read", "shop/delivery"},
		{"sending", "crm/get_customer", "emit", "crm/get_customer"},
		{"read", "crm/get_customer", "read", "crm/get_customer"},
		{"read", "crm/getCustomer", "read", "crm/getcustomer"},
	}
	for _, c := range cases {
		t.Run(c.verb+" "+c.ability, func(t *testing.T) {
			body := mutate(t, mutate(t, base, "action.verb", c.verb), "action.ability", c.ability)
			env, err := ParseEnvelope(body)
			require.NoError(t, err)
			assert.Equal(t, c.wantVerb, env.Action.Verb, "verb %q ability %q", c.verb, c.ability)
			assert.Equal(t, c.wantAbility, env.Action.Ability, "the stored ability stays folded")
			assert.Equal(t, c.verb, env.Action.RawVerb)
		})
	}
}

// TestFoldInvisibleAndLookAlike: characters that render as nothing, as
// space, or as a Latin letter do not make a different name.
func TestFoldInvisibleAndLookAlike(t *testing.T) {
	tests := map[string]string{
		"alice\u3164":       "alice", // HANGUL FILLER
		"alice\u115f":       "alice", // HANGUL CHOSEONG FILLER
		"ali\u1160ce":       "alice", // HANGUL JUNGSEONG FILLER
		"alice\uffa0":       "alice", // HALFWIDTH HANGUL FILLER
		"ali\u034fce":       "alice", // COMBINING GRAPHEME JOINER
		"alice\ufe0f":       "alice", // VARIATION SELECTOR-16
		"ali\ufe00ce":       "alice", // VARIATION SELECTOR-1
		"alice\U000e0100":   "alice", // VARIATION SELECTOR-17
		"ali\u180bce":       "alice", // MONGOLIAN FREE VARIATION SELECTOR ONE
		"ali\u17b4ce":       "alice", // KHMER VOWEL INHERENT AQ
		"alice\u2800":       "alice", // BRAILLE PATTERN BLANK
		"\u2800alice":       "alice",
		"a\u0335lice":       "alice",  // COMBINING SHORT STROKE OVERLAY
		"a\u0338lice":       "alice",  // COMBINING LONG SOLIDUS OVERLAY
		"alice\u0301\u034f": "alicé",  // an accent that composes stays
		"ᴅelete":            "delete", // LATIN LETTER SMALL CAPITAL D
		"ᴀʟɪᴄᴇ":             "alice",
		"ʙᴏʙ":               "bob",
		"ꜰʀᴀɴᴋ":             "frank",
		"ɢʜᴊᴋᴍɴᴏᴘꞯꜱᴛᴜᴠᴡʏᴢ": "ghjkmnopqstuvwyz",
		"\ua7aeɪ":          "ii",          // CAPITAL SMALL CAPITAL I folds to ɪ
		"\u01a6":           "r",           // Ʀ folds to ʀ
		"human\u2236alice": "human:alice", // RATIO
		"human\ua789alice": "human:alice", // MODIFIER LETTER COLON
		"café":             "café",
		"cafe\u0301":       "café",
		"zoë":              "zoë",
		"straße":           "strasse",
	}
	for in, want := range tests {
		assert.Equal(t, want, Fold(in), "Fold(%q)", in)
	}
	assert.Equal(t, "A\u0338lice", Clean("A\u0338lice\u3164"), "Clean keeps case and combining marks")
	assert.Equal(t, "हिंदी", Clean("हिंदी\u200b"), "Clean keeps vowel signs")
	assert.Equal(t, "delete", Clean("dele\u034fte\u2800"))
	assert.Equal(t, "Dé", Clean("De\u0301"))
}

// TestCleanFoldIdempotent: cleaning or folding twice changes nothing, and
// folding a cleaned value is folding the raw one (identities are stored
// cleaned and compared folded).
func TestCleanFoldIdempotent(t *testing.T) {
	pool := []rune("aAeEiIjJlLsSkK:@ -_\u0130\u0131\u01f0\u0390\u1e9e\u017f\u212a\u0301\u0308\u030c\u0307\u0335" +
		"\u0338\u034f\u200b\u200d\u3164\u115f\u1160\uffa0\ufe0f\u2800\u0430\u0435\u1d05\u1d00\u029f\ua7ae" +
		"\u09c7\u09be\u0915\u094d\u0937\u3099\u304b\uff76\uff9e\u00e9\u0065\u1100\u1161\u11a8\uac00\u2236" +
		"\ufdfa\u3000\u00a0\u2028\ufb01\U0001d165\u0f73\u0f71\u0f72")
	rng := rand.New(rand.NewPCG(3, 7))
	for range 100000 {
		var b strings.Builder
		for range rng.IntN(8) {
			b.WriteRune(pool[rng.IntN(len(pool))])
		}
		s := b.String()
		c, f := Clean(s), Fold(s)
		require.Equal(t, c, Clean(c), "Clean(Clean(%q))", s)
		require.Equal(t, f, Fold(f), "Fold(Fold(%q))", s)
		require.Equal(t, f, Fold(c), "Fold(Clean(%q))", s)
	}
}
