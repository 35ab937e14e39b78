package cmd

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTrueUnlessOptedOut(t *testing.T) {
	tests := map[string]bool{
		"": true, "true": true, "1": true, "yes": true, "on": true, "maybe": true, "fals": true, "nope": true,
		"false": false, "FALSE": false, " False ": false, "0": false, "no": false, "NO": false, "off": false, "Off": false,
	}
	for in, want := range tests {
		require.Equal(t, want, trueUnlessOptedOut(in), "trueUnlessOptedOut(%q)", in)
	}
}
