package envelope

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// exactNumberCases are literals and whether JCS writes each as the very
// number it is (so params and context accept it).
var exactNumberCases = []struct {
	lit   string
	exact bool
}{
	{"0", true},
	{"-0", true},
	{"-0.0", true},
	{"0.000e-5", true},
	{"0e999999999999999999999", true}, // zero whatever the exponent
	{"1", true},
	{"-1", true},
	{"100", true},
	{"1.0", true},
	{"1.50", true},
	{"-1.5", true},
	{"0.1", true},
	{"0.10000000000000000000", true}, // long fractional zeros
	{"2.5e-3", true},
	{"1e20", true},
	{"1E+0020", true}, // exponent with leading zeros
	{"1e-0", true},
	{"100000000000000000000", true},
	{"999999999999999", true},   // 15 digits, the unchecked fast path
	{"-999999999999999", true},  // likewise
	{"1234567890123456", true},  // 16 digits, checked
	{"9007199254740992", true},  // 2^53
	{"-9007199254740992", true}, // -2^53
	{"123456789012345680000", true},
	{"1.7976931348623157e308", true}, // largest double
	{"5e-324", true},                 // smallest subnormal, as JCS writes it
	{"2.2250738585072014e-308", true},
	{"0.30000000000000004", true},

	{"9007199254740993", false}, // 2^53+1 reads as 2^53
	{"-9007199254740993", false},
	{"1.00000000000000000001", false}, // reads as 1
	{"0.1000000000000000000000000001", false},
	{"123456789012345678901234567890", false},
	{"1152921504606846976", false}, // 2^60 is a double, but JCS writes 1152921504606847000
	{"9223372036854775807", false}, // max int64
	{"0.3", true},
	{"0.30000000000000001", false}, // the double 0.3, spelled with a digit JCS drops
	{"1e400", false},               // overflow
	{"-1e400", false},
	{"1.7976931348623159e308", false}, // rounds to +Inf
	{"1e-400", false},                 // underflow to 0
	{"1e-100000000", false},           // must not build 10^100000000
	{"1e999999999999999999999999", false},
	{"-1e-99999999999999999999", false},
	{"4.9406564584124654e-324", false}, // the smallest subnormal, spelled out: JCS writes 5e-324
	{"3e-324", false},                  // rounds to that subnormal
	{"2e-324", false},                  // rounds to 0
}

func TestExactNumber(t *testing.T) {
	for _, c := range exactNumberCases {
		assert.Equal(t, c.exact, exactNumber([]byte(c.lit)), "exactNumber(%s)", c.lit)
		assert.Equal(t, c.exact, legacyExactNumber(c.lit), "legacyExactNumber(%s)", c.lit)
	}
}

// TestExactNumberMatchesLegacy compares exactNumber with the big.Rat
// reference on generated literals near the edges: long mantissas, zeros
// in every place, exponents around double range.
func TestExactNumberMatchesLegacy(t *testing.T) {
	rng := rand.New(rand.NewPCG(7493, 2))
	digits := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteByte("0123456789"[rng.IntN(10)])
			if rng.IntN(3) == 0 {
				b.WriteString(strings.Repeat("0", rng.IntN(20)))
			}
		}
		return b.String()
	}
	for range 20000 {
		lit := strings.TrimLeft(digits(1+rng.IntN(20)), "0")
		if lit == "" || rng.IntN(5) == 0 {
			lit = "0"
		}
		if rng.IntN(2) == 0 {
			lit += "." + digits(1+rng.IntN(20))
		}
		if rng.IntN(2) == 0 {
			lit += fmt.Sprintf("%s%+0*d", []string{"e", "E"}[rng.IntN(2)], rng.IntN(5), rng.IntN(700)-350)
		}
		if rng.IntN(2) == 0 {
			lit = "-" + lit
		}
		require.Equal(t, legacyExactNumber(lit), exactNumber([]byte(lit)), "literal %s", lit)
	}
	for _, f := range []float64{1, 0.1, 1e21, 1e22, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308} {
		for _, spelled := range []string{fmt.Sprint(f), fmt.Sprintf("%.40g", f), fmt.Sprintf("%.17e", f),
			fmt.Sprintf("%f", f)} {
			require.Equal(t, legacyExactNumber(spelled), exactNumber([]byte(spelled)), "literal %s", spelled)
		}
	}
}

// TestParamsNumbersRefused checks the refusal at every depth of params and
// context, named by path, and that other members keep their numbers.
func TestParamsNumbersRefused(t *testing.T) {
	base := string(readEnvelope(t, "minimal.json"))
	with := func(repl string) string { return strings.Replace(base, `"approval":`, repl+`, "approval":`, 1) }
	cases := []struct{ name, body, field string }{
		{"after an earlier duplicate key", with(`"params": {"x": 1, "x": 1e400}`), "params.x duplicate"},
		{"account number past 2^53", with(`"params": {"to_account": 9007199254740993, "quantity": 100}`), "params.to_account"},
		{"in an array", with(`"params": {"ids": [1, 2, 9007199254740993]}`), "params.ids[]"},
		{"deep", with(`"params": {"a": [{"b": {"c": [[1e400]]}}]}`), "params.a[].b.c[][]"},
		{"in context", with(`"context": {"budget": 1.00000000000000000001}`), "context.budget"},
		{"context.mode", with(`"context": {"mode": 1e-400}`), "context.mode"},
		{"the first in document order", with(`"params": {"b": 1e400, "a": 1e-400}`), "params.b"},
		{"before a later duplicate key", with(`"params": {"x": 1e400, "x": 1}`), "params.x"},
		{"before a missing field", strings.Replace(with(`"params": {"n": 1e400}`), `"agent": {"id": "agent-7", "session_id": "sess-1"},`, "", 1), "params.n"},
		{"escaped params key", with(`"p\u0061rams": {"n": 1e400}`), "params.n"},
		{"key with a dot", with(`"params": {"a.b": 1e400}`), "params.a.b"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := &InvalidEnvelope{Field: c.field, Reason: inexactNumberReason}
			if field, ok := strings.CutSuffix(c.field, " duplicate"); ok { // the first refusal is the key
				want = &InvalidEnvelope{Field: field, Reason: "duplicate key (keys must be unique)"}
			}
			_, err := ParseEnvelope([]byte(c.body))
			require.Equal(t, want, err)
			requireSameAsLegacy(t, []byte(c.body))
		})
	}
	unchecked := []struct{ name, body string }{
		{"an unknown member", with(`"x_vendor": {"n": 1e400}`)},
		{"params not an object", with(`"params": [1e400]`)},
		{"a nested member named params", with(`"params": {"params": {"n": 1}}, "x": {"params": {"n": 1e400}}`)},
		{"exact spellings", with(`"params": {"a": 9007199254740992, "b": [0.1, 1.0, 1.50, -0, 1e20, 2.5e-3, 1E+0020]}`)},
	}
	for _, c := range unchecked {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseEnvelope([]byte(c.body))
			var inv *InvalidEnvelope
			if errors.As(err, &inv) {
				assert.NotEqual(t, inexactNumberReason, inv.Reason)
			}
			requireSameAsLegacy(t, []byte(c.body))
		})
	}
}

// TestParamsHashBindsOneNumber is the bug: two account numbers that one
// double holds had one params_hash, so one approval covered both. Now the
// one a double cannot hold is refused, and exact spellings of one value
// still hash alike.
func TestParamsHashBindsOneNumber(t *testing.T) {
	base := string(readEnvelope(t, "minimal.json"))
	params := func(p string) []byte {
		return []byte(strings.Replace(base, `"approval":`, `"params": `+p+`, "approval":`, 1))
	}
	hash := func(body []byte) string {
		env, err := ParseEnvelope(body)
		require.NoError(t, err)
		h, err := env.ParamsHash()
		require.NoError(t, err)
		return h
	}
	_, err := ParseEnvelope(params(`{"to_account": 9007199254740993, "quantity": 100}`))
	require.Equal(t, &InvalidEnvelope{Field: "params.to_account", Reason: inexactNumberReason}, err)
	_, err = ParseEnvelope(params(`{"to_account": 1.00000000000000000001}`))
	require.Equal(t, &InvalidEnvelope{Field: "params.to_account", Reason: inexactNumberReason}, err)

	held := hash(params(`{"to_account": 9007199254740992, "quantity": 100}`))
	assert.Equal(t, held, hash(params(`{"to_account": 9.007199254740992e15, "quantity": 1E+0002}`)), "same values")
	assert.NotEqual(t, held, hash(params(`{"to_account": "9007199254740993", "quantity": 100}`)), "sent as a string")
}
