package strictjson

import (
	"encoding/json"
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
		{"duplicate in array", `{"x": [{"k": 1, "k": 2}]}`, false, "x[].k", "duplicate key"},
		{"unknown nested", `{"b": {"d": 1}}`, true, "b.d", "unknown member"},
		{"unknown allowed", `{"z": 1}`, false, "", ""},
		{"type", `{"a": 1}`, true, "a", "must be a string"},
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
