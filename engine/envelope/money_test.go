package envelope_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine/envelope"
)

// transferEnvelope is a transfer in dev whose params are params (a JSON
// object's members).
func transferEnvelope(agent, session, params string) []byte {
	return fmt.Appendf(nil, `{"svc_version":"0.2",
		"agent":{"id":%q,"on_behalf_of":"human:alice","session_id":%q},
		"action":{"namespace":"bank","verb":"transfer","ability":"bank/transfer"},
		"target":{"kind":"account","ref":"acct-1","environment":"dev"},"params":{%s},"magnitude":{"count":1},
		"axes":{"reversibility":"reversible","blast_radius":"single","externality":"outbound"},
		"approval":{"present":false,"hold_id":null},"context":{},
		"meta":{"timestamp":"2026-01-01T00:00:00Z","nonce":"n","signature":"s"}}`, agent, session, params)
}

func TestMoneyCanonical(t *testing.T) {
	for _, tc := range []struct {
		params string
		want   *envelope.Money
	}{
		{`"amount": 4000, "currency": "EUR"`, &envelope.Money{Amount: "4000", Units: 40000000, Currency: "EUR", RawCurrency: "EUR"}},
		{`"amount": "4000", "currency": "eur"`, &envelope.Money{Amount: "4000", Units: 40000000, Currency: "EUR", RawCurrency: "eur"}},
		{`"amount": " 4000.50 ", "currency": " e u r "`, &envelope.Money{Amount: "4000.5", Units: 40005000, Currency: "EUR", RawCurrency: " e u r "}},
		{`"amount": "４０００", "currency": "ＥＵＲ"`, &envelope.Money{Amount: "4000", Units: 40000000, Currency: "EUR", RawCurrency: "ＥＵＲ"}},
		{`"amount": 0.1, "currency": "USD"`, &envelope.Money{Amount: "0.1", Units: 1000, Currency: "USD", RawCurrency: "USD"}},
		{`"amount": 12.0500, "currency": "USD"`, &envelope.Money{Amount: "12.05", Units: 120500, Currency: "USD", RawCurrency: "USD"}},
		{`"amount": 0, "currency": "USD"`, &envelope.Money{Amount: "0", Units: 0, Currency: "USD", RawCurrency: "USD"}},
		{`"amount": 1000000000000, "currency": "JPY"`, &envelope.Money{Amount: "1000000000000", Units: 10000000000000000, Currency: "JPY", RawCurrency: "JPY"}},
		{`"amount": 5, "currency": "\u0415UR"`, &envelope.Money{Amount: "5", Units: 50000, Currency: "EUR", RawCurrency: "ЕUR"}}, // Cyrillic Е
		// never free: a missing, null, empty, blank or unknown currency
		{`"amount": 4000`, &envelope.Money{Amount: "4000", Units: 40000000, Currency: "XXX"}},
		{`"amount": 4000, "currency": null`, &envelope.Money{Amount: "4000", Units: 40000000, Currency: "XXX"}},
		{`"amount": 4000, "currency": ""`, &envelope.Money{Amount: "4000", Units: 40000000, Currency: "XXX"}},
		{`"amount": 4000, "currency": " "`, &envelope.Money{Amount: "4000", Units: 40000000, Currency: "XXX", RawCurrency: " "}},
		{`"amount": 4000, "currency": "\u200b"`, &envelope.Money{Amount: "4000", Units: 40000000, Currency: "XXX", RawCurrency: "\u200b"}},
		{`"amount": 4000, "currency": "EURO"`, &envelope.Money{Amount: "4000", Units: 40000000, Currency: "XXX", RawCurrency: "EURO"}},
		{`"amount": 4000, "currency": "DEM"`, &envelope.Money{Amount: "4000", Units: 40000000, Currency: "XXX", RawCurrency: "DEM"}},
		{`"amount": 4000, "currency": "XTS"`, &envelope.Money{Amount: "4000", Units: 40000000, Currency: "XXX", RawCurrency: "XTS"}},
		// no amount, no money
		{`"currency": "EUR"`, nil},
		{`"amount": null, "currency": "EUR"`, nil},
		{``, nil},
	} {
		t.Run(tc.params, func(t *testing.T) {
			env, err := envelope.ParseEnvelope(transferEnvelope("a", "s", tc.params))
			require.NoError(t, err)
			assert.Equal(t, tc.want, env.Money)
		})
	}
}

// Amounts that are not plain non-negative decimals are refused with 400
// naming params.amount: signs, exponents, NaN and infinities, separators,
// hex, too many decimals, too large; and a currency that is not a string.
func TestMoneyRefused(t *testing.T) {
	for _, tc := range []struct{ params, field string }{
		{`"amount": -1, "currency": "EUR"`, "params.amount"},
		{`"amount": -0, "currency": "EUR"`, "params.amount"},
		{`"amount": "-1", "currency": "EUR"`, "params.amount"},
		{`"amount": "+1", "currency": "EUR"`, "params.amount"},
		{`"amount": 4e3, "currency": "EUR"`, "params.amount"},
		{`"amount": 4E+3, "currency": "EUR"`, "params.amount"},
		{`"amount": "4e3", "currency": "EUR"`, "params.amount"},
		{`"amount": 1e-2, "currency": "EUR"`, "params.amount"},
		{`"amount": "NaN", "currency": "EUR"`, "params.amount"},
		{`"amount": "nan", "currency": "EUR"`, "params.amount"},
		{`"amount": "Infinity", "currency": "EUR"`, "params.amount"},
		{`"amount": "inf", "currency": "EUR"`, "params.amount"},
		{`"amount": "0x10", "currency": "EUR"`, "params.amount"},
		{`"amount": "4,000", "currency": "EUR"`, "params.amount"},
		{`"amount": "4 000", "currency": "EUR"`, "params.amount"},
		{`"amount": "4_000", "currency": "EUR"`, "params.amount"},
		{`"amount": "1.", "currency": "EUR"`, "params.amount"},
		{`"amount": ".5", "currency": "EUR"`, "params.amount"},
		{`"amount": "007", "currency": "EUR"`, "params.amount"},
		{`"amount": "", "currency": "EUR"`, "params.amount"},
		{`"amount": " ", "currency": "EUR"`, "params.amount"},
		{`"amount": 0.00001, "currency": "EUR"`, "params.amount"},
		{`"amount": 1000000000000.0001, "currency": "EUR"`, "params.amount"},
		{`"amount": "10000000000000", "currency": "EUR"`, "params.amount"},
		{`"amount": true, "currency": "EUR"`, "params.amount"},
		{`"amount": [1], "currency": "EUR"`, "params.amount"},
		{`"amount": {"value": 1}, "currency": "EUR"`, "params.amount"},
		{`"amount": 1, "currency": 978`, "params.currency"},
		{`"amount": 1, "currency": ["EUR"]`, "params.currency"},
	} {
		t.Run(tc.params, func(t *testing.T) {
			_, err := envelope.ParseEnvelope(transferEnvelope("a", "s", tc.params))
			var invalid *envelope.InvalidEnvelope
			require.ErrorAs(t, err, &invalid)
			assert.Equal(t, tc.field, invalid.Field)
		})
	}
}

// Exact decimals: 0.1 + 0.2 is 0.3 in units, where float64 is not.
func TestMoneyUnitsAreExact(t *testing.T) {
	units := func(amount string) int64 {
		env, err := envelope.ParseEnvelope(transferEnvelope("a", "s", `"amount": `+amount+`, "currency": "EUR"`))
		require.NoError(t, err)
		return env.Money.Units
	}
	assert.Equal(t, units("0.3"), units("0.1")+units("0.2"))
	assert.Equal(t, int64(99999999), units(`"9999.9999"`))
}

func FuzzMoney(f *testing.F) {
	for _, s := range []string{`4000`, `"4000.5"`, `-1`, `4e3`, `"NaN"`, `0.00001`, `"４０００"`, `1000000000000`} {
		f.Add(s, "EUR")
	}
	f.Fuzz(func(t *testing.T, amount, currency string) {
		body := transferEnvelope("a", "s", `"amount": `+amount+`, "currency": `+fmt.Sprintf("%q", currency))
		env, err := envelope.ParseEnvelope(body)
		if err != nil {
			return
		}
		m := env.Money
		if m == nil {
			return // amount null
		}
		require.GreaterOrEqual(t, m.Units, int64(0))
		require.LessOrEqual(t, m.Units, int64(envelope.MaxAmount)*10000)
		require.Len(t, m.Currency, 3)
		require.Equal(t, strings.ToUpper(m.Currency), m.Currency)
		// the canonical amount reads back as itself
		again, err := envelope.ParseEnvelope(transferEnvelope("a", "s", `"amount": "`+m.Amount+`", "currency": "`+m.Currency+`"`))
		require.NoError(t, err)
		require.Equal(t, m.Units, again.Money.Units)
		require.Equal(t, m.Amount, again.Money.Amount)
	})
}
