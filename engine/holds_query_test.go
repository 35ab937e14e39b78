package engine

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseHoldQuery(t *testing.T) {
	tests := []struct {
		query string
		want  HoldQuery
		field string // of the refusal; "" when accepted
	}{
		{query: "", want: HoldQuery{Status: "all", Limit: DefaultHoldLimit}},
		{query: "status=settled&order=newest&limit=5&cursor=c", want: HoldQuery{Status: "settled", Limit: 5, Cursor: "c", Newest: true}},
		{query: "order=oldest", want: HoldQuery{Status: "all", Limit: DefaultHoldLimit}},
		{query: "order=Newest", field: "order"},
		{query: "order=", field: "order"},
		{query: "order=newest&order=oldest", field: "order"},
		{query: "status=resolved", field: "status"},
		{query: "limit=0", field: "limit"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			vals, err := url.ParseQuery(tt.query)
			require.NoError(t, err)
			q, err := ParseHoldQuery(vals)
			if tt.field == "" {
				require.NoError(t, err)
				require.Equal(t, tt.want, q)
				return
			}
			var e *Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, tt.field, e.Fields["field"])
		})
	}
}

// TestStrictQuery: a query string that does not parse (Go's url.Query
// drops a pair holding ";" without a word) or names another parameter is
// refused naming it, so that "status=consumed;x" is not read as every hold.
func TestStrictQuery(t *testing.T) {
	tests := []struct{ query, field string }{
		{"status=consumed&limit=5", ""},
		{"", ""},
		{"status=consumed;x", "query"},
		{"limit=0;", "query"},
		{"cursor=%zz", "query"},
		{"WAIT=5", "WAIT"},
		{"status=all&colour=red", "colour"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/v1/holds?"+tt.query, nil)
			_, err := StrictQuery(r, "status", "limit", "order", "cursor")
			if tt.field == "" {
				require.NoError(t, err)
				return
			}
			var e *Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, tt.field, e.Fields["field"])
		})
	}
}

func TestHoldWaitQueryTakesLeadingZeros(t *testing.T) {
	for query, want := range map[string]time.Duration{"wait=00000000": 0, "wait=0000000300": 300 * time.Second} {
		vals, err := url.ParseQuery(query)
		require.NoError(t, err)
		got, err := ParseHoldWait(vals)
		require.NoError(t, err, query)
		require.Equal(t, want, got)
	}
	vals, _ := url.ParseQuery("wait=99999999999999999999999")
	_, err := ParseHoldWait(vals)
	require.Error(t, err)
}
