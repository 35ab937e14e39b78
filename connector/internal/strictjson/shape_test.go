package strictjson

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type inner struct {
	Name string `json:"name"`
}

type embedded struct {
	Kind string `json:"kind"`
}

type spelled struct {
	embedded
	Items  []*inner           `json:"items"`
	ByKey  map[string]inner   `json:"by_key"`
	Free   map[string]any     `json:"free"`
	Raw    json.RawMessage    `json:"raw"`
	Params map[string]*string `json:"params"`
	Self   *spelled           `json:"self"`
	Plain  string
	Hidden string `json:"-"`
}

// A member that encoding/json would take for a struct field spelled
// otherwise is refused wherever a struct is decoded — at the top, in a
// slice element, in a map's struct value, through a pointer, in an embedded
// struct, in a recursive type — while the keys of maps and the members of
// free values are compared exactly, as a case-sensitive reader compares them.
func TestDecodeRefusesMisspeltMembers(t *testing.T) {
	cases := []struct {
		name, raw, field, want string
	}{
		{"top", `{"ITEMS": []}`, "ITEMS", "items"},
		{"beside the field", `{"items": [{"name": "a"}], "Items": []}`, "Items", "items"},
		{"in a slice element", `{"items": [{"name": "a"}, {"name": "b", "NAME": "c"}]}`, "items[1].NAME", "name"},
		{"in a map's struct value", `{"by_key": {"x": {"Name": "a"}}}`, "by_key.x.Name", "name"},
		{"embedded", `{"KIND": "x"}`, "KIND", "kind"},
		{"recursive", `{"self": {"self": {"Kind": "x"}}}`, "self.self.Kind", "kind"},
		{"look-alikes encoding/json does not match", `{"iteｍs": [], "ıtems": [], "by_ĸey": {}}`, "", ""},
		{"long s", `{"by_key": {"x": {"name": "a"}}, "ſelf": {}}`, "ſelf", "self"},
		{"Kelvin sign", `{"\u212aind": "x"}`, "\u212aind", "kind"},
		{"untagged field", `{"plain": "x"}`, "plain", "Plain"},
		{"map keys are free", `{"free": {"Name": 1, "name": 2}, "params": {"A": "1", "a": "2"}}`, "", ""},
		{"raw is free", `{"raw": {"Name": 1, "name": 2}}`, "", ""},
		{"an ignored field is no field", `{"HIDDEN": "x"}`, "", ""},
		{"exact names", `{"kind": "k", "items": [{"name": "a"}], "by_key": {"Name": {"name": "b"}}, "Plain": "p"}`, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var d spelled
			err := Decode([]byte(tc.raw), &d, false)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			var e *Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, tc.field, e.Field)
			assert.Equal(t, "member names are spelled exactly: "+tc.want, e.Reason)
		})
	}
}
