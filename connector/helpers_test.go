package connector

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	return raw
}

// json9007199254740993 is a number a double cannot hold exactly.
func json9007199254740993() json.Number { return json.Number("9007199254740993") }
