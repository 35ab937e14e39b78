package opa

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/envelope"
)

// TestVerdictOfExactMembers: a verdict's members are read by their exact
// names. A member that spells decision, rule or reason another way (which
// encoding/json would have matched, the last one winning) or repeats one
// makes the verdict malformed, whatever it says; unrelated members are
// ignored.
func TestVerdictOfExactMembers(t *testing.T) {
	deny := engine.Verdict{Decision: engine.Deny, Rule: "svc.policy/strict", Reason: "policy says deny"}
	const members = `"decision":"deny","rule":"svc.policy/strict","reason":"policy says deny"`
	tests := []struct {
		name  string
		value string
		want  string // error substring; "" means deny
	}{
		{"exact", `{` + members + `}`, ""},
		{"extra unrelated members", `{` + members + `,"decision_id":"x","decisions":["allow"],"meta":{"Decision":"allow"},"n":1.5e3,"ok":true,"z":null}`, ""},
		{"white space", " {\n\t\"decision\" : \"deny\" ,\r\"rule\":\"svc.policy/strict\", \"reason\":\"policy says deny\" } ", ""},
		{"escaped strings", `{"decision":"\u0064eny","rule":"svc.policy\/strict","reason":"policy says d\u0065ny"}`, ""},
		{"escaped exact names", `{"d\u0065cision":"deny","rule":"svc.policy/strict","reason":"policy says deny"}`, ""},
		{"long s after decision", `{` + members + `,"deciſion":"allow"}`, `"deciſion" spells "decision" another way`},
		{"long s before decision", `{"deciſion":"allow",` + members + `}`, `"deciſion" spells "decision" another way`},
		{"escaped long s", `{` + members + `,"deci\u017fion":"allow"}`, `spells "decision" another way`},
		{"capitalised", `{"Decision":"allow","rule":"svc.policy/strict","reason":"x"}`, `"Decision" spells "decision" another way`},
		{"upper case", `{"DECISION":"allow","RULE":"x","REASON":"y"}`, `"DECISION" spells "decision" another way`},
		{"all case variants", `{"Decision":"allow","RULE":"x","Reason":"y"}`, "spells"},
		{"rule in another case", `{` + members + `,"Rule":"x"}`, `"Rule" spells "rule" another way`},
		{"reason with long s", `{` + members + `,"reaſon":"x"}`, `"reaſon" spells "reason" another way`},
		{"full-width letters", `{` + members + `,"ｄｅｃｉｓｉｏｎ":"allow"}`, `spells "decision" another way`},
		{"zero-width space", `{` + members + `,"deci\u200bsion":"allow"}`, `spells "decision" another way`},
		{"surrounding space", `{` + members + `," decision":"allow"}`, `spells "decision" another way`},
		{"cyrillic look-alike", `{` + members + `,"d\u0435cision":"allow"}`, `spells "decision" another way`},
		{"duplicate decision", `{` + members + `,"decision":"allow"}`, `"decision" appears twice`},
		{"duplicate through an escape", `{` + members + `,"d\u0065cision":"allow"}`, `"decision" appears twice`},
		{"duplicate null decision", `{"decision":null,` + members + `}`, `"decision" appears twice`},
		{"not an object", `["decision"]`, "not an object of strings"},
		{"malformed", `{"decision":"deny"`, "not an object of strings"},
		{"absent", ``, "not an object of strings"},
		{"null", `null`, "lacks"},
		{"null member", `{"decision":null,"rule":"r","reason":"x"}`, "lacks"},
		{"numeric rule", `{"decision":"deny","rule":1,"reason":"x"}`, "not an object of strings: rule is 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := verdictOf(json.RawMessage(tt.value))
			if tt.want == "" {
				require.NoError(t, err)
				assert.Equal(t, deny, got)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.Equal(t, engine.Verdict{}, got)
		})
	}
}

// TestExactMembers walks objects whose values hold what could fool a
// scanner: nested objects and arrays, quotes, escapes and brackets in
// strings, numbers and literals.
func TestExactMembers(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		a, b string // the raw values of a and b; "" means absent
	}{
		{"empty", `{}`, "", ""},
		{"null", ` null `, "", ""},
		{"scalars", `{"a":-1.5e+3,"b":true}`, "-1.5e+3", "true"},
		{"nested", `{"x":{"a":[1,{"b":2}]},"a":[{"}":"]"}],"b":{"a":{}}}`, `[{"}":"]"}]`, `{"a":{}}`},
		{"escapes in strings", `{"q\"a":"\"","a":"x\\","b":"\\\"}"}`, `"x\\"`, `"\\\"}"`},
		{"last member null", `{"a" : null }`, "null", ""},
		{"unrelated folded names", `{"A_":1,"ß":2,"b":3}`, "", "3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got [2]json.RawMessage
			require.NoError(t, envelope.ExactMembers([]byte(tt.doc), []string{"a", "b"}, got[:]))
			assert.Equal(t, tt.a, string(got[0]))
			assert.Equal(t, tt.b, string(got[1]))
		})
	}
}

// BenchmarkVerdictOf measures reading a verdict, which server mode does for
// every decision: about 3 allocations, one per decoded string.
func BenchmarkVerdictOf(b *testing.B) {
	value := json.RawMessage(`{"decision":"deny","rule":"svc.policy/strict","reason":"policy says deny","extra":{"k":[1,2]}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := verdictOf(value); err != nil {
			b.Fatal(err)
		}
	}
}
