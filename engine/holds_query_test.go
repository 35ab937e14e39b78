package engine

import (
	"net/url"
	"testing"

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
