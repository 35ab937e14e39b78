package connector

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPreCallOnly(t *testing.T) {
	cases := []struct {
		body string
		want bool
	}{
		{`{"input_type": "request", "texts": ["hi"]}`, true},
		{`{"texts": [{"a": 1, "a": 2}], "input_type": "request"}`, true},
		{`{"texts": ["\ud800"], "input_type": "request"}`, true},
		{`{"input\u005ftype": "request"}`, true},
		{`{"Input_Type": "request"}`, true},
		{`{"input_type": "response"}`, false},
		{`{"input_type": "request", "input_type": "request"}`, false},
		{`{"input_type": "request", "INPUT_TYPE": "response"}`, false},
		{`{"input_type": "req\u0075est"}`, false},
		{`{"input_type": ["request"]}`, false},
		{`{"nested": {"input_type": "request"}}`, false},
		{`{"input_type": "request"} {"input_type": "response"}`, false},
		{`{"input_type": "request"`, false},
		{`["input_type", "request"]`, false},
		{``, false},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, preCallOnly(strings.NewReader(tc.body)), tc.body)
	}
}
