package envelope

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMemberNames checks the exported reader of an object's member names:
// in order, escapes decoded as encoding/json decodes them, duplicates kept,
// and anything but one JSON object refused.
func TestMemberNames(t *testing.T) {
	tests := []struct {
		name, doc string
		want      []string
	}{
		{"in order, duplicates kept", `{"b":1,"a":{"c":2},"b":3}`, []string{"b", "a", "b"}},
		{"escapes decoded", `{"d\u0065cision":1,"\"q\"":2}`, []string{"decision", `"q"`}},
		{"invalid UTF-8 as encoding/json reads it", "{\"a\xff\":1,\"a\xfe\":2}", []string{"a\ufffd", "a\ufffd"}},
		{"full-width name kept as it is", `{"ｄecision":1}`, []string{"ｄecision"}},
		{"white space around", " \n{ \"a\" : 1 }\t", []string{"a"}},
		{"empty object", `{}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := MemberNames([]byte(tt.doc))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	for _, doc := range []string{`null`, ` null `, `[]`, `["decision","allow"]`, `"x"`, `1`, ``, `{`, `{} {}`, `{"a":}`} {
		t.Run("refuses "+doc, func(t *testing.T) {
			got, err := MemberNames([]byte(doc))
			require.EqualError(t, err, "not a JSON object")
			assert.Nil(t, got)
		})
	}
}

// TestNullIsAnObjectOnlyToTheVerdictReaders checks that null reads as an
// object without members where an OPA answer may carry it (ExactMembers),
// and nowhere else.
func TestNullIsAnObjectOnlyToTheVerdictReaders(t *testing.T) {
	var values [1]json.RawMessage
	require.NoError(t, ExactMembers([]byte(" null "), []string{"a"}, values[:]))
	assert.Nil(t, values[0])
	_, err := ScanObject([]byte("null"))
	assert.ErrorIs(t, err, errNotObject)
}

// TestExactMembersManyMembers checks duplicates among many members, which
// KeySet looks up in a map past maxLinearKeys, as well as among few.
func TestExactMembersManyMembers(t *testing.T) {
	members := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, `"m%d":%d,`, i, i)
		}
		return b.String()
	}
	for _, n := range []int{1, maxLinearKeys - 1, maxLinearKeys, maxLinearKeys + 1, 10 * maxLinearKeys} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var values [1]json.RawMessage
			require.NoError(t, ExactMembers([]byte(`{`+members(n)+`"a":true}`), []string{"a"}, values[:]))
			assert.Equal(t, "true", string(values[0]))

			err := ExactMembers([]byte(`{`+members(n)+`"m0":0}`), []string{"a"}, values[:])
			assert.EqualError(t, err, "a member appears twice")
			err = ExactMembers([]byte(`{"a":1,`+members(n)+`"\u0061":2}`), []string{"a"}, values[:])
			assert.EqualError(t, err, `member "a" appears twice`)
			err = ExactMembers([]byte(fmt.Sprintf(`{%s"m%d":0}`, members(n), n-1)), []string{"a"}, values[:])
			assert.EqualError(t, err, "a member appears twice", "the last member repeated")
		})
	}
}
