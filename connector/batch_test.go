package connector

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBatchHoldWaitIsANumber: hold_wait_seconds is a JSON number of
// seconds from 0 to 3600; a string holding one, or any other type, is
// refused naming the field, as null leaves the connector's wait.
func TestBatchHoldWaitIsANumber(t *testing.T) {
	for raw, want := range map[string]time.Duration{`0`: 0, `4`: 4 * time.Second, `2.5`: 2500 * time.Millisecond, `3600`: time.Hour} {
		req, err := parseBatch([]byte(`{"tool_calls": [], "hold_wait_seconds": ` + raw + `}`))
		require.NoError(t, err, raw)
		require.NotNil(t, req.HoldWait, raw)
		assert.Equal(t, want, *req.HoldWait, raw)
	}
	req, err := parseBatch([]byte(`{"tool_calls": [], "hold_wait_seconds": null}`))
	require.NoError(t, err)
	assert.Nil(t, req.HoldWait)
	for _, raw := range []string{`"4"`, `"abc"`, `true`, `[]`, `{}`, `-1`, `3601`, `1e400`} {
		_, err := parseBatch([]byte(`{"tool_calls": [], "hold_wait_seconds": ` + raw + `}`))
		var br *BadRequest
		require.ErrorAs(t, err, &br, raw)
		assert.Equal(t, "hold_wait_seconds", br.Field, raw)
		assert.Equal(t, "must be a number of seconds from 0 to 3600", br.Reason, raw)
	}
}
