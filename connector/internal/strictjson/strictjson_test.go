package strictjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type doc struct {
	A string `json:"a"`
	B struct {
		C int `json:"c"`
	} `json:"b"`
}

func TestDecode(t *testing.T) {
	cases := []struct {
		name, raw    string
		known        bool
		field, match string
	}{
		{"ok", `{"a": "x", "b": {"c": 1}}`, true, "", ""},
		{"duplicate top", `{"a": "x", "a": "y"}`, false, "a", "duplicate key"},
		{"duplicate escaped", `{"a": "x", "\u0061": "y"}`, false, "a", "duplicate key"},
		{"duplicate nested", `{"b": {"c": 1, "c": 2}}`, false, "b.c", "duplicate key"},
		{"duplicate in array", `{"x": [{"k": 1, "k": 2}]}`, false, "x[0].k", "duplicate key"},
		{"duplicate in a later element", `{"x": [{"k": 1}, {"j": [1, 2], "k": 1, "k": 2}]}`, false, "x[1].k", "duplicate key"},
		{"unknown nested", `{"b": {"d": 1}}`, true, "b.d", "unknown member"},
		{"unknown allowed", `{"z": 1}`, false, "", ""},
		{"type", `{"a": 1}`, true, "a", "must be a string"},
		{"type nested", `{"a": "x", "b": {"c": "1"}}`, true, "b.c", "must be an integer"},
		{"integer, not a fraction", `{"b": {"c": 1.5}}`, true, "b.c", "must be an integer"},
		{"trailing", `{"a": "x"} {}`, true, "", "exactly one JSON value"},
		{"broken", `{"a": `, true, "", "not well-formed"},
		{"escaped quote in name", `{"a\"b": 1, "a\"b": 2}`, false, `a"b`, "duplicate key"},
		{"strings holding braces", `{"a": "{[\"", "b": {"c": 1}, "x": "}"}`, false, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var d doc
			err := Decode([]byte(tc.raw), &d, tc.known)
			if tc.match == "" {
				require.NoError(t, err)
				return
			}
			var e *Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, tc.field, e.Field)
			assert.Contains(t, e.Reason, tc.match)
		})
	}
}

// TestTypeErrorPath: a value of the wrong type is named by its whole path,
// map keys and array indices included, which encoding/json's own field
// name leaves out.
func TestTypeErrorPath(t *testing.T) {
	type call struct {
		ID       string `json:"id"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	var d struct {
		Tenants map[string]struct {
			Env  string   `json:"environment"`
			Tags []string `json:"tags"`
		} `json:"tenants"`
		Calls   []call            `json:"tool_calls"`
		Headers map[string]string `json:"request_headers"`
	}
	for raw, field := range map[string]string{
		`{"tenants": {"a": {"environment": "dev"}, "b": {"environment": 5}}}`:                   "tenants.b.environment",
		`{"tenants": {"a": {"tags": ["x", 2]}}}`:                                                "tenants.a.tags[1]",
		`{"tenants": {"a": {"environment": ["prod"]}}}`:                                         "tenants.a.environment",
		`{"tool_calls": [{"id": "c1"}, {"id": 7}]}`:                                             "tool_calls[1].id",
		`{"tool_calls": [{"id": "c1", "function": {"name": "x"}}, {"function": {"name": {}}}]}`: "tool_calls[1].function.name",
		`{"request_headers": {"x-a": "1", "x-svc-session": 2}}`:                                 "request_headers.x-svc-session",
		`{"tool_calls": {"id": "c1"}}`:                                                          "tool_calls",
	} {
		var e *Error
		require.ErrorAs(t, Decode([]byte(raw), &d, false), &e, raw)
		assert.Equal(t, field, e.Field, raw)
	}
}

func TestCheckSpelling(t *testing.T) {
	require.NoError(t, CheckSpelling([]byte(`{"decision": "deny", "other": 1}`), "decision"))
	for _, raw := range []string{`{"decision": "deny", "Decision": "allow"}`, `{"deciſion": "allow"}`, `{"DECISION": "allow"}`} {
		var e *Error
		require.ErrorAs(t, CheckSpelling([]byte(raw), "decision"), &e, raw)
	}
	require.Error(t, CheckSpelling([]byte(`[]`), "decision"))
}

// TestMemberName reads every member name as encoding/json does: the bytes
// of a plain ASCII name, and escapes, non-ASCII and invalid UTF-8 decoded
// by the decoder itself, so that names it reads alike are one member.
func TestMemberName(t *testing.T) {
	for _, quoted := range []string{`"a"`, `""`, `"tool_calls"`, `"a b~"`, `"\u0061"`, `"a\"b"`, `"\\"`,
		`"é"`, `"\u00e9"`, "\"\xff\"", "\"\xef\xbf\xbd\"", `"\ud800"`, "\"a\x7f\""} {
		var want string
		require.NoError(t, json.Unmarshal([]byte(quoted), &want), quoted)
		assert.Equal(t, want, memberName([]byte(quoted)), quoted)
	}
	for _, doc := range []string{`{"é": 1, "\u00e9": 2}`, "{\"\xff\": 1, \"\xfe\": 2}", "{\"\xff\": 1, \"\uFFFD\": 2}"} {
		var e *Error
		require.ErrorAs(t, CheckDuplicates([]byte(doc)), &e, doc)
		assert.Equal(t, "duplicate key (keys must be unique)", e.Reason)
	}
}

// TestDuplicatesPastTheList: an object of more members than its list of
// names holds keeps them in a map, and still catches a name read twice.
func TestDuplicatesPastTheList(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := range 3 * fewKeys {
		fmt.Fprintf(&b, `"m%d": %d, `, i, i)
	}
	ok := b.String() + `"last": 0}`
	require.NoError(t, CheckDuplicates([]byte(ok)))
	var e *Error
	require.ErrorAs(t, CheckDuplicates([]byte(b.String()+`"m1": 0}`)), &e)
	assert.Equal(t, "m1", e.Field)
	require.ErrorAs(t, CheckDuplicates([]byte(b.String()+fmt.Sprintf(`"m%d": 0}`, 3*fewKeys-1))), &e)
	assert.Equal(t, fmt.Sprintf("m%d", 3*fewKeys-1), e.Field)
}

// TestDecodeNamesTheDuplicateFirst: a document both malformed for v and
// naming a member twice is refused for the duplicate, as before the
// decoder read it first.
func TestDecodeNamesTheDuplicateFirst(t *testing.T) {
	var d doc
	var e *Error
	require.ErrorAs(t, Decode([]byte(`{"a": 1, "b": {"c": 1, "c": 2}}`), &d, true), &e)
	assert.Equal(t, "b.c", e.Field)
	assert.Contains(t, e.Reason, "duplicate key")
	require.ErrorAs(t, Decode([]byte(`{"b": {"c": 1, "c": 2}, "zz": 1}`), &d, true), &e)
	assert.Equal(t, "b.c", e.Field)
}

func TestDecodeSpelled(t *testing.T) {
	type answer struct {
		Decision string `json:"decision"`
		Other    int    `json:"other"`
	}
	cases := []struct {
		name, raw, field, match string
	}{
		{"ok", `{"decision": "deny", "other": 1, "more": {"Decision": 1}}`, "", ""},
		{"case", `{"decision": "deny", "Decision": "allow"}`, "Decision", "spelled exactly"},
		{"fold", `{"deciſion": "allow"}`, "deciſion", "spelled exactly"},
		{"upper", `{"DECISION": "allow"}`, "DECISION", "spelled exactly"},
		{"duplicate", `{"decision": "deny", "decision": "allow"}`, "decision", "duplicate key"},
		{"nested duplicate", `{"decision": "deny", "x": {"a": 1, "a": 2}}`, "x.a", "duplicate key"},
		{"array", `[]`, "", "must be a JSON object"},
		{"null", `null`, "", "must be a JSON object"},
		{"broken", `{"decision": `, "", "must be a JSON object"},
		{"type", `{"decision": 1}`, "decision", "must be a string"},
		{"trailing", `{"decision": "deny"} x`, "", "must be a JSON object"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var a answer
			err := DecodeSpelled([]byte(tc.raw), &a, "decision", "other")
			if tc.match == "" {
				require.NoError(t, err)
				assert.Equal(t, "deny", a.Decision)
				return
			}
			var e *Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, tc.field, e.Field)
			assert.Contains(t, e.Reason, tc.match)
		})
	}
}

// FuzzDecode holds Decode to the reading it had before it became one
// pass: a validity check, a duplicate scan with a map per object, then
// the decoder (reference below): same refusals, same fields, same value.
// The one refusal the reference does not make, a member spelled in
// another case than a field of doc, must name such a member.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"a": "x", "b": {"c": 1}}`, `{"a": "x", "a": "y"}`, `{"x": [{"k": 1, "k": 2}]}`,
		`{"b": {"d": 1}}`, `{"a": 1}`, `{"a": "x"} {}`, `{"a": `, `{"a\"b": 1, "a\"b": 2}`, `[[{"k":1}],{"k":[1,{"k":2,"k":3}]}]`,
		`{"é": 1, "\u00e9": 2}`, `{"b": {"c": 1, "c": 2}, "zz": 1}`, ` 1 `, `null`} {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, raw []byte, known bool) {
		var got, want doc
		err, wantErr := Decode(raw, &got, known), referenceDecode(raw, &want, known)
		if field, ok := misspeltField(err); ok {
			name := field[strings.LastIndex(field, ".")+1:]
			want := strings.TrimPrefix(err.(*Error).Reason, misspeltReason)
			require.Contains(t, []string{"a", "b", "c"}, want, field)
			require.True(t, strings.EqualFold(name, want) && name != want, field)
			return
		}
		if wantErr == nil {
			require.NoError(t, err)
			require.Equal(t, want, got)
			return
		}
		var e, we *Error
		require.ErrorAs(t, err, &e)
		require.ErrorAs(t, wantErr, &we)
		require.Equal(t, *we, *e)
	})
}

const misspeltReason = "member names are spelled exactly: "

// misspeltField is the member err refuses as spelled in another case
// than a field.
func misspeltField(err error) (string, bool) {
	var e *Error
	if errors.As(err, &e) && strings.HasPrefix(e.Reason, misspeltReason) {
		return e.Field, true
	}
	return "", false
}

// referenceDecode is Decode as it was: json.Valid, a duplicate scan with
// a path string (array elements by index) and a map per object, then the
// decoder.
func referenceDecode(raw []byte, v any, known bool) error {
	if !json.Valid(raw) {
		return &Error{Reason: "not well-formed JSON (exactly one JSON value)"}
	}
	type rframe struct {
		object, expectKey bool
		path, member      string
		index             int
		keys              map[string]bool
	}
	var stack []*rframe
	childPath := func() string {
		if len(stack) == 0 {
			return ""
		}
		if top := stack[len(stack)-1]; top.object {
			return join(top.path, top.member)
		}
		top := stack[len(stack)-1]
		return fmt.Sprintf("%s[%d]", top.path, top.index)
	}
	var members []string
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '{':
			stack = append(stack, &rframe{object: true, path: childPath(), expectKey: true, keys: map[string]bool{}})
		case '[':
			stack = append(stack, &rframe{path: childPath()})
		case '}', ']':
			stack = stack[:len(stack)-1]
		case ',':
			if top := stack[len(stack)-1]; top.object {
				top.expectKey = true
			} else {
				top.index++
			}
		case '"':
			end := stringEnd(raw, i)
			if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].expectKey {
				top := stack[n-1]
				name := memberName(raw[i : end+1])
				member := join(top.path, name)
				if top.keys[name] {
					return &Error{Field: member, Reason: "duplicate key (keys must be unique)"}
				}
				top.keys[name], top.member, top.expectKey = true, name, false
				members = append(members, member)
			}
			i = end
		}
	}
	err := decode(raw, v, known)
	var e *Error
	if errors.As(err, &e) && e.Reason == "unknown member" && !strings.Contains(e.Field, ".") {
		found := ""
		for _, m := range members {
			if found == "" && (m == e.Field || strings.HasSuffix(m, "."+e.Field)) {
				found = m
			}
		}
		if found != "" {
			e.Field = found
		}
	}
	return err
}
