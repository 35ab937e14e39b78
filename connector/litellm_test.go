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
