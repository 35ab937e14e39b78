package holds

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTokensEntryNotAnObject checks that an entry that is not an object is
// refused by its type, and that tokens that encoding/json reads alike
// (invalid UTF-8 read as U+FFFD) are one token listed twice.
func TestTokensEntryNotAnObject(t *testing.T) {
	for _, entry := range []string{`"human:alice"`, `["human","alice"]`, `7`} {
		t.Run(entry, func(t *testing.T) {
			_, err := parseTokens([]byte(`{"t": ` + entry + `}`))
			require.ErrorContains(t, err, "resolver tokens: an entry is not {type, id}")
		})
	}
	_, err := parseTokens([]byte("{\"t\xff\": {\"type\": \"human\", \"id\": \"a\"}, \"t\xfe\": {\"type\": \"agent\", \"id\": \"b\"}}"))
	assert.ErrorContains(t, err, "entries 1 and 2 have the same token")
}
