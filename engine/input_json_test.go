package engine

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine/envelope"
)

// requireInputAsMarshalled checks that PolicyInputOf writes json.Marshal's
// bytes for env.
func requireInputAsMarshalled(t *testing.T, env *envelope.Envelope, c Cumulative, frozen bool) {
	t.Helper()
	got, err := PolicyInputOf(env, c, frozen)
	require.NoError(t, err)
	policyEnv := *env
	policyEnv.Extra = nil
	words := env.Words
	if words == nil {
		words = []string{}
	}
	want, err := json.Marshal(PolicyInput{Envelope: &policyEnv, ActionWords: words, Cumulative: c, Frozen: frozen})
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
	// The envelope members PolicyInputOf drops (Extra) are written as
	// json.Marshal writes them too.
	full, err := appendEnvelope(nil, env)
	require.NoError(t, err)
	want, err = json.Marshal(env)
	require.NoError(t, err)
	require.Equal(t, string(want), string(full))
}

func envelopeTestdata(t testing.TB, name string) []byte {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("envelope", "testdata", "envelopes", name))
	require.NoError(t, err)
	return body
}

func TestPolicyInputJSON(t *testing.T) {
	usage := Cumulative{WindowSeconds: 86400,
		Usage:     Usage{Totals: Totals{Deletes: 3, ExternalSends: 1, Objects: 9}, Money: Amounts{"EUR": 150, "USD": 7, "<&>": 1}},
		Agent:     Usage{Totals: Totals{Objects: 1 << 40}, Money: Amounts{}},
		Principal: Usage{Totals: Totals{Deletes: -1}}}
	for _, name := range []string{"minimal.json", "full.json"} {
		env, err := envelope.ParseEnvelope(envelopeTestdata(t, name))
		require.NoError(t, err)
		requireInputAsMarshalled(t, env, Cumulative{}, false)
		requireInputAsMarshalled(t, env, usage, true)
	}
	env, err := envelope.ParseEnvelope([]byte(`{"svc_version": "0.2",
		"agent": {"id": "a<b>&c", "on_behalf_of": "human:x", "session_id": "s1"},
		"action": {"namespace": "pay", "verb": "send", "ability": "pay/transfer"},
		"target": {"kind": "acct", "ref": "é𝄞", "environment": "prod"},
		"params": {"ctl": "\u2028\u2029\u0001\"\\/\b\f\n\r\t", "z": {"b": [1, -0.5e3, true, null, "x", {}], "a": []}, "A": 9007199254740992, "": ""},
		"money": {"amount": "12.50", "currency": "eur"},
		"magnitude": {"count": 2},
		"axes": {"reversibility": "irreversible", "blast_radius": "single", "externality": "outbound"},
		"approval": {"present": true, "hold_id": "h-1"}, "trajectory_ref": "t<1>",
		"context": {"mode": "observe", "nested": {"k": [[]]}},
		"meta": {"timestamp": "2026-11-26T18:00:00Z", "nonce": "n", "signature": "s"},
		"x_extra": {"kept": "out of the input"}}`))
	require.NoError(t, err)
	requireInputAsMarshalled(t, env, usage, false)

	// Envelopes built by hand (tests do) may hold values of any type, and
	// strings that are not UTF-8.
	trajectory := "\xff\xfe"
	built := &envelope.Envelope{
		Agent:         envelope.Agent{ID: "bad \xc3\x28 utf-8"},
		Params:        map[string]any{"int": 3, "float": 2.5, "strings": map[string]string{"b": "<", "a": ">"}, "n": json.Number("")},
		TrajectoryRef: &trajectory,
		Extra:         map[string]json.RawMessage{"x": json.RawMessage(`{"y": 1}`)},
	}
	requireInputAsMarshalled(t, built, Cumulative{}, false)
	requireInputAsMarshalled(t, &envelope.Envelope{}, Cumulative{}, false)
}

// A value json.Marshal refuses fails PolicyInputOf as it failed before.
func TestPolicyInputJSONRefusesWhatMarshalRefuses(t *testing.T) {
	for _, v := range []any{json.Number("1x"), make(chan int)} {
		_, err := PolicyInputOf(&envelope.Envelope{Params: map[string]any{"bad": v}}, Cumulative{}, false)
		require.Error(t, err)
	}
}

// validJSONNumber accepts the numbers json.Marshal accepts as a
// json.Number, and no other.
func TestValidJSONNumber(t *testing.T) {
	for _, n := range []string{"0", "-0", "1", "-12", "10.5", "0.0", "1e5", "1E+5", "-1.5e-07", "",
		"-", "01", "1.", ".5", "1e", "1e+", "+1", "1.5.5", "0x1", "1 ", " 1", "--1", "1e5.5", "Infinity", "1_000"} {
		_, err := json.Marshal(json.Number(n))
		require.Equal(t, err == nil && n != "", validJSONNumber(n), "%q", n)
	}
}

func FuzzPolicyInputJSON(f *testing.F) {
	for _, name := range []string{"minimal.json", "full.json"} {
		f.Add(envelopeTestdata(f, name))
	}
	f.Add([]byte(`{"agent": {"id": "a", "session_id": "s"}, "action": {"verb": "read", "ability": "x"},
		"target": {"environment": "dev"}, "magnitude": {"count": 1},
		"axes": {"reversibility": "reversible", "blast_radius": "single", "externality": "internal"},
		"approval": {"present": false}, "params": {"\u003c": ["\u2028", 1e400, {"": null}]}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		env, err := envelope.ParseEnvelope(body)
		if err != nil {
			return
		}
		requireInputAsMarshalled(t, env, Cumulative{WindowSeconds: 1, Usage: Usage{Money: Amounts{"EUR": 1}}}, true)
	})
}
