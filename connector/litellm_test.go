package connector

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestToolNameNeedsALetterOrDigit: a name that canonicalises to nothing
// is refused naming the field, rather than read as the ability
// "gateway/" that every such name would share, with its budgets and
// approvals.
func TestToolNameNeedsALetterOrDigit(t *testing.T) {
	for _, name := range []string{"___", "-", "💣", "\u200b", " . "} {
		_, err := readToolCalls([]*wireToolCall{{Function: &wireFunction{Name: &name}}}, "tool_calls")
		var br *BadRequest
		require.ErrorAs(t, err, &br, "%q", name)
		assert.Equal(t, "tool_calls[0].function.name", br.Field)
		assert.Equal(t, "must contain a letter or digit", br.Reason)
	}
	name := "_purge-rows_"
	calls, err := readToolCalls([]*wireToolCall{{Function: &wireFunction{Name: &name}}}, "tool_calls")
	require.NoError(t, err)
	assert.Equal(t, "_purge-rows_", calls[0].Name, "the name is kept as sent")
}

// TestSessionHeaderInAnyCase: the x-svc-session header is read whatever
// the case of its name; two spellings with different values are refused
// rather than one picked in map order.
func TestSessionHeaderInAnyCase(t *testing.T) {
	s := func(v string) *string { return &v }
	cases := []struct {
		headers map[string]*string
		want    string
		err     bool
	}{
		{map[string]*string{"x-svc-session": s("A")}, "A", false},
		{map[string]*string{"X-Svc-Session": s("A")}, "A", false},
		{map[string]*string{"x-svc-session": s("A"), "X-SVC-SESSION": s("A")}, "A", false},
		{map[string]*string{"x-svc-session": s("A"), "X-Svc-Session": s("B")}, "", true},
		{map[string]*string{"x-svc-session": nil, "x-other": s("B")}, "", false},
	}
	for _, tc := range cases {
		for range 20 { // map order varies between runs
			got, err := sessionHeaderOf(tc.headers)
			if tc.err {
				var br *BadRequest
				require.ErrorAs(t, err, &br)
				assert.Equal(t, "request_headers.x-svc-session", br.Field)
				continue
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		}
	}
}
