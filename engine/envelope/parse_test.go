package envelope

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func readEnvelope(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "envelopes", name))
	require.NoError(t, err)
	return b
}

// mutate applies a JSON merge-style edit to the minimal envelope: a key path
// "a.b" set to value, or deleted when value is the string "<delete>".
func mutate(t testing.TB, base []byte, path string, value any) []byte {
	t.Helper()
	var doc map[string]any
	require.NoError(t, json.Unmarshal(base, &doc))
	parts := strings.Split(path, ".")
	m := doc
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	last := parts[len(parts)-1]
	if value == "<delete>" {
		delete(m, last)
	} else {
		m[last] = value
	}
	out, err := json.Marshal(doc)
	require.NoError(t, err)
	return out
}

func TestParseEnvelopeAccepts(t *testing.T) {
	env, err := ParseEnvelope(readEnvelope(t, "full.json"))
	require.NoError(t, err)
	assert.Equal(t, "delete", env.Action.Verb)
	assert.Equal(t, "Remove", env.Action.RawVerb)
	assert.Equal(t, "production", env.Target.Environment)
	assert.Equal(t, "PRD", env.Target.RawEnvironment)
	assert.Equal(t, "irreversible", env.Axes.Reversibility)
	assert.Equal(t, "broad", env.Axes.BlastRadius)
	assert.Equal(t, int64(3), env.Magnitude.Count)
	assert.Equal(t, ModeObserve, env.Mode)
	assert.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", env.Traceparent())
	assert.Contains(t, env.Extra, "x_vendor")

	minimal, err := ParseEnvelope(readEnvelope(t, "minimal.json"))
	require.NoError(t, err)
	assert.Equal(t, ModeEnforce, minimal.Mode)
	assert.Empty(t, minimal.Params)
}

func TestParseEnvelopeRefuses(t *testing.T) {
	base := readEnvelope(t, "minimal.json")
	cases := []struct {
		path  string
		value any
		field string
	}{
		{"agent", "<delete>", "agent"},
		{"agent.id", "<delete>", "agent.id"},
		{"agent.id", "  ", "agent.id"},
		{"agent.id", "\u200b", "agent.id"},
		{"agent.id", "agent-7\nagent-8", "agent.id"},
		{"agent.id", "agent\u200b-7", "agent.id"},
		{"agent.id", "agent-7\u0085", "agent.id"},
		{"agent.id", "\u202eagent-7", "agent.id"},
		{"agent.on_behalf_of", "human:bob\r", "agent.on_behalf_of"},
		{"agent.on_behalf_of", "human:\u2060bob", "agent.on_behalf_of"},
		{"agent.session_id", "sess\t1", "agent.session_id"},
		{"agent.session_id", "\ufeffsess-1", "agent.session_id"},
		{"agent.id", 7, "agent.id"},
		{"agent.session_id", "<delete>", "agent.session_id"},
		{"action.verb", "<delete>", "action.verb"},
		{"action.ability", "", "action.ability"},
		{"target.environment", "<delete>", "target.environment"},
		{"magnitude.count", "<delete>", "magnitude.count"},
		{"magnitude.count", 0, "magnitude.count"},
		{"magnitude.count", -3, "magnitude.count"},
		{"magnitude.count", 1.5, "magnitude.count"},
		{"magnitude.count", "5", "magnitude.count"},
		{"magnitude.count", 1e15, "magnitude.count"},
		{"axes.reversibility", "sometimes", "axes.reversibility"},
		{"axes.blast_radius", "galactic", "axes.blast_radius"},
		{"axes.externality", "<delete>", "axes.externality"},
		{"axes", "<delete>", "axes"},
		{"approval", "<delete>", "approval"},
		{"approval.present", "<delete>", "approval.present"},
		{"approval.present", "true", "approval.present"},
		{"approval.present", 1, "approval.present"},
		{"params", []any{1}, "params"},
		{"params", "x", "params"},
		{"context", "x", "context"},
		{"context.mode", "audit", "context.mode"},
		{"context.mode", 3, "context.mode"},
		{"context.traceparent", 3, "context.traceparent"},
		{"target.ref", strings.Repeat("r", maxStringLen+1), "target.ref"},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			_, err := ParseEnvelope(mutate(t, base, c.path, c.value))
			var inv *InvalidEnvelope
			require.ErrorAs(t, err, &inv, "value %v", c.value)
			assert.Equal(t, c.field, inv.Field)
			assert.NotEmpty(t, inv.Reason)
		})
	}
}

func TestParseEnvelopeAxesCaseFolded(t *testing.T) {
	base := readEnvelope(t, "minimal.json")
	env, err := ParseEnvelope(mutate(t, base, "axes.reversibility", "IRREVERSIBLE"))
	require.NoError(t, err)
	assert.Equal(t, "irreversible", env.Axes.Reversibility)
}

func TestParseEnvelopeInvalidJSON(t *testing.T) {
	for _, body := range []string{"", "{", "{\"agent\":", "nul", "{} {}", "{}x", "\x00",
		`{"agent": {}, "agent": {}, "x": }`} { // malformed JSON wins over an earlier duplicate key
		_, err := ParseEnvelope([]byte(body))
		assert.ErrorIs(t, err, ErrInvalidJSON, "body %q", body)
	}
	for _, body := range []string{"[]", "null", "3", "\"s\""} {
		_, err := ParseEnvelope([]byte(body))
		var inv *InvalidEnvelope
		assert.ErrorAs(t, err, &inv, "body %q", body)
	}
}

func FuzzParseEnvelope(f *testing.F) {
	for _, name := range []string{"minimal.json", "full.json"} {
		f.Add(readEnvelope(f, name))
	}
	f.Add([]byte(`{"agent":{"id":"\u200b"}}`))
	f.Add([]byte(`[1,2]`))
	f.Add([]byte(strings.Replace(string(readEnvelope(f, "minimal.json")), `"approval":`, `"params": {"to_account":
		9007199254740993, "ok": [9007199254740992, 0.10000000000000000000, 1E+0020, -0, 2.5e-3, 5e-324]},
		"context": {"n": [1.00000000000000000001, 1e-400, 123456789012345678901234567890]}, "approval":`, 1)))
	f.Add([]byte(`{"params": {"a\u0041": [1e400, -0.5E+3, "\ud800\udc00\ud800"], "a\u0041": null}}`))
	f.Add([]byte("{\"agent\": {\"I\xffD\": 1, \"\u212Aind\": {\"\": [{}]}}, \"\": {\"Target\": 1}}"))
	f.Fuzz(func(t *testing.T, body []byte) {
		requireSameAsLegacy(t, body)
		env, err := ParseEnvelope(body)
		if err != nil {
			require.Nil(t, env)
			return
		}
		// An accepted envelope is fully canonical and hashable.
		assert.Contains(t, []string{"production", "staging", "dev"}, env.Target.Environment)
		assert.Contains(t, verbRisk, env.Action.Verb)
		assert.GreaterOrEqual(t, env.Magnitude.Count, int64(1))
		_, err = env.Hash()
		require.NoError(t, err)
		_, err = env.ParamsHash()
		require.NoError(t, err)
	})
}

func TestParseEnvelopeRefusesAmbiguousKeys(t *testing.T) {
	base := string(readEnvelope(t, "minimal.json"))
	cases := []struct {
		name, body, field string
	}{
		{"duplicate top-level object", strings.Replace(base, `"target":`, `"target": {"environment": "dev"}, "target":`, 1), "target"},
		{"case-variant top-level twin", strings.Replace(base, `"target":`, `"TARGET": {"environment": "dev"}, "target":`, 1), "TARGET"},
		{"case-variant field alone", strings.Replace(base, `"target":`, `"Target":`, 1), "Target"},
		{"duplicate nested field", strings.Replace(base, `"environment": "staging"`, `"environment": "staging", "environment": "dev"`, 1), "target.environment"},
		{"case-variant nested field", strings.Replace(base, `"environment": "staging"`, `"Environment": "staging"`, 1), "target.Environment"},
		{"zero-width twin", strings.Replace(base, `"id": "agent-7"`, `"id": "agent-7", "i\u200bd": "x"`, 1), "agent.i\u200bd"},
		{"duplicate params key", strings.Replace(base, `"approval":`, `"params": {"cmd": "ls", "cmd": "rm -rf /"}, "approval":`, 1), "params.cmd"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseEnvelope([]byte(c.body))
			var inv *InvalidEnvelope
			require.ErrorAs(t, err, &inv)
			assert.Equal(t, c.field, inv.Field)
		})
	}
	ok := strings.Replace(base, `"approval":`, `"params": {"ID": 1, "id": 2}, "context": {"Mode": "x"}, "approval":`, 1)
	_, err := ParseEnvelope([]byte(ok))
	assert.NoError(t, err, "free-form maps keep keys that differ only in case")
}

func TestParseEnvelopeJSONCorners(t *testing.T) {
	base := string(readEnvelope(t, "minimal.json"))
	with := func(old, repl string) string { return strings.Replace(base, old, repl, 1) }
	params := func(p string) string { return with(`"approval":`, `"params": `+p+`, "approval":`) }
	nest := func(n int) string { return strings.Repeat("[", n) + "1" + strings.Repeat("]", n) }
	var many []string
	for i := range 40 {
		many = append(many, fmt.Sprintf(`"k%d": %d`, i, i))
	}
	cases := []struct {
		name, body, field, reason string // field "" is accepted; "json" is ErrInvalidJSON
	}{
		{"escaped key spells a field", with(`"target":`, `"t\u0061rget":`), "", ""},
		{"escaped key in another case", with(`"target":`, `"\u0054arget":`), "Target", misspeltReason},
		{"escaped twin of a key", with(`"target":`, `"t\u0061rget": {}, "target":`), "target", "duplicate key (keys must be unique)"},
		{"Kelvin sign folds to k", with(`"environment"`, `"\u212Aind": "x", "environment"`), "target.\u212Aind", misspeltReason},
		{"space around a field name", with(`"agent":`, `" agent": {}, "agent":`), " agent", misspeltReason},
		{"optional field behind a space", with(`"environment"`, `"kind ": "x", "environment"`), "target.kind ", misspeltReason},
		{"full-width field name", with(`"environment"`, `"\uff4bind": "x", "environment"`), "target.\uff4bind", misspeltReason},
		{"zero-width space in a field name", with(`"environment"`, `"ki\u200bnd": "x", "environment"`), "target.ki\u200bnd", misspeltReason},
		{"space-padded key in params is free-form", params(`{" id": 1, "id": 2}`), "", ""},
		{"invalid UTF-8 keys are refused", params("{\"a\xff\": 1, \"a\xfe\": 2}"), "json", ""},
		{"lone surrogates are refused", params(`{"\ud800": 1, "\udfff": 2}`), "json", ""},
		{"surrogate pairs stay apart", params(`{"\ud83d\ude00": 1, "\ud83d\ude01": 2}`), "", ""},
		{"many keys, duplicate late", params("{" + strings.Join(many, ", ") + `, "k33": 0}`), "params.k33", "duplicate key (keys must be unique)"},
		{"huge numbers in params", params(`{"n": 1e400, "m": 123456789012345678901234567890}`), "params.n", inexactNumberReason},
		{"long integer in params", params(`{"m": 123456789012345678901234567890}`), "params.m", inexactNumberReason},
		{"integer past 2^53 in params", params(`{"to_account": 9007199254740993, "amount": 100}`), "params.to_account", inexactNumberReason},
		{"fraction a double rounds", params(`{"x": [1, {"y": 1.00000000000000000001}]}`), "params.x[].y", inexactNumberReason},
		{"underflow in params", params(`{"tiny": 1e-400}`), "params.tiny", inexactNumberReason},
		{"inexact number in context", with(`"approval":`, `"context": {"n": [1e400]}, "approval":`), "context.n[]", inexactNumberReason},
		{"inexact number before a duplicate key", params(`{"a": 1e400, "a": 1}`), "params.a", inexactNumberReason},
		{"malformed JSON before an inexact number", params(`{"a": 1e400, }`), "json", ""},
		{"exact numbers in params", params(`{"a": 9007199254740992, "b": [0.1, 1.0, 1.50, -0, 1e20, 100000000000000000000, 2.5e-3, 1E+0020, 0.10000000000000000000]}`), "", ""},
		{"inexact numbers outside params and context are not checked", with(`"agent":`, `"x_n": 1e400, "agent":`), "", ""},
		{"huge count", with(`"count": 1`, `"count": 1e400`), "magnitude.count", "must be an integer from 1 to 1000000000000"},
		{"long integer count", with(`"count": 1`, `"count": 123456789012345678901234567890`), "magnitude.count", "must be an integer from 1 to 1000000000000"},
		{"nesting at the limit", params(`{"a": ` + nest(maxNestingDepth-2) + `}`), "", ""},
		{"nesting past the limit", params(`{"a": ` + nest(maxNestingDepth-1) + `}`), "json", ""},
		{"depth before an ambiguous key", params(`{"a": ` + nest(maxNestingDepth) + `, "a": 1}`), "json", ""},
		{"depth after an ambiguous key", params(`{"a": 1, "a": ` + nest(maxNestingDepth) + `}`), "json", ""},
		{"malformed JSON before depth", params(`{"a": ` + nest(maxNestingDepth) + `,}`), "json", ""},
		{"deep array root", nest(maxNestingDepth + 1), "json", ""},
		{"type error before a missing field", with(`{"id": "agent-7", `, `{"id": 7, `), "agent.id", "must be a string"},
		{"a member keyed \"\" is free-form", with(`"agent":`, `"": {"AGENT": 1, "agent": {"ID": 1}}, "agent":`), "", ""},
		{"duplicates under \"\" are still refused", with(`"agent":`, `"": {"a": 1, "a": 2}, "agent":`), "a", "duplicate key (keys must be unique)"},
		{"envelope object names nested deeper are free-form", params(`{"agent": {"ID": 1}}`), "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env, err := ParseEnvelope([]byte(c.body))
			switch c.field {
			case "":
				require.NoError(t, err)
				assert.Equal(t, "staging", env.Target.Environment)
			case "json":
				require.ErrorIs(t, err, ErrInvalidJSON)
			default:
				require.Equal(t, &InvalidEnvelope{Field: c.field, Reason: c.reason}, err)
			}
		})
	}
}

func TestParseEnvelopeDecodesValues(t *testing.T) {
	body := []byte(strings.Replace(string(readEnvelope(t, "minimal.json")), `"approval":`,
		`"params": {"s": "a\u0041\n\ud83d\ude00\ufffd", "n": -0.5e+3, "l": [true, null, {}], "e": []},
		"x_raw": [1, {"b": "c"}], "approval":`, 1))
	env, err := ParseEnvelope(body)
	require.NoError(t, err)
	want := map[string]any{"s": "aA\n\U0001F600\ufffd", "n": json.Number("-0.5e+3"),
		"l": []any{true, nil, map[string]any{}}, "e": []any{}}
	assert.Equal(t, want, env.Params)
	assert.Equal(t, map[string]json.RawMessage{"x_raw": json.RawMessage(`[1, {"b": "c"}]`)}, env.Extra)

	for i := range body { // the envelope must not alias the request body
		body[i] = 'X'
	}
	assert.Equal(t, want, env.Params)
	assert.Equal(t, json.RawMessage(`[1, {"b": "c"}]`), env.Extra["x_raw"])
	assert.Equal(t, "agent-7", env.Agent.ID)
	assert.Equal(t, "read", env.Action.RawVerb)
}

// wireTags returns the fields of struct type t by their json tags.
func wireTags(t reflect.Type) map[string]reflect.StructField {
	tags := map[string]reflect.StructField{}
	for _, f := range reflect.VisibleFields(t) {
		tags[f.Tag.Get("json")] = f
	}
	return tags
}

// wireStruct returns the wire struct type that decodes the envelope object
// at path: wireEnvelope for the root, else the type its field points to.
func wireStruct(t *testing.T, path string) reflect.Type {
	t.Helper()
	root := reflect.TypeFor[wireEnvelope]()
	if path == "" {
		return root
	}
	f, ok := wireTags(root)[path]
	require.True(t, ok, "wireEnvelope has no field tagged %q", path)
	return f.Type.Elem()
}

// wireValue is a JSON value the decoder stores in a field of type t.
func wireValue(t reflect.Type) string {
	switch {
	case t == reflect.TypeFor[*string]():
		return `"v"`
	case t == reflect.TypeFor[*bool]():
		return "true"
	}
	return "{}"
}

// TestEnvelopeObjectsMatchWireForm checks that envelopeObjects, the wire
// structs' json tags and the decoder's set methods spell the same keys:
// each object lists exactly its struct's tags, and each key, decoded alone,
// lands in the field tagged with it and in no other.
func TestEnvelopeObjectsMatchWireForm(t *testing.T) {
	var nested []string
	for _, f := range reflect.VisibleFields(reflect.TypeFor[wireEnvelope]()) {
		if f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Struct {
			nested = append(nested, f.Tag.Get("json"))
		}
	}
	var paths []string
	for _, o := range envelopeObjects[1:] {
		paths = append(paths, o.path)
	}
	require.ElementsMatch(t, nested, paths, "every wire struct is an envelope object")
	for _, o := range envelopeObjects {
		t.Run("object "+o.path, func(t *testing.T) {
			typ := wireStruct(t, o.path)
			tags := wireTags(typ)
			require.ElementsMatch(t, slices.Collect(maps.Keys(tags)), o.fields)
			for _, key := range o.fields {
				obj := decodeAlone(t, o.path, key, wireValue(tags[key].Type))
				for tag, f := range tags {
					assert.Equal(t, tag == key, !obj.FieldByIndex(f.Index).IsZero(), "key %q, field %s", key, f.Name)
				}
			}
		})
	}
}

// decodeAlone decodes an envelope whose object at path holds only key, and
// returns that object.
func decodeAlone(t *testing.T, path, key, value string) reflect.Value {
	t.Helper()
	m := member{key: []byte(key), value: []byte(value)}
	if path != "" {
		m = member{key: []byte(path), value: []byte(`{"` + key + `": ` + value + `}`)}
	}
	w, err := decodeWire([]member{m})
	require.NoError(t, err)
	obj := reflect.ValueOf(w).Elem()
	if path != "" {
		obj = obj.FieldByIndex(wireTags(obj.Type())[path].Index)
		require.False(t, obj.IsNil(), "object %q", path)
		obj = obj.Elem()
	}
	return obj
}

// TestEnvelopeStringFieldsFitDecoder checks that the decoder has room for
// every string field of the wire form without allocating.
func TestEnvelopeStringFieldsFitDecoder(t *testing.T) {
	n := 0
	for _, o := range envelopeObjects {
		for _, f := range wireTags(wireStruct(t, o.path)) {
			if f.Type == reflect.TypeFor[*string]() {
				n++
			}
		}
	}
	assert.Equal(t, stringFields, n)
}
