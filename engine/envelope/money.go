package envelope

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
)

// Money is the amount an action moves, read from params.amount and
// params.currency (docs/policy.md, "Money"). It is absent when params has
// no amount.
type Money struct {
	// Amount is the canonical decimal: no sign, no exponent, no leading
	// zeros, no trailing zeros after the point ("4000", "0.3", "12.05").
	Amount string `json:"amount"`
	// Units is the amount in units of 1/10 000 (MoneyScale): the exact
	// integer the budgets sum and compare.
	Units int64 `json:"units"`
	// Currency is the ISO 4217 code, upper case, or UnknownCurrency when
	// the currency is missing, null, empty, blank or not a known code.
	Currency string `json:"currency"`
	// RawCurrency is the currency as sent ("" when missing or null).
	RawCurrency string `json:"raw_currency"`
}

// Money limits and scale.
const (
	// MoneyScale is how many decimal places an amount may have: Units
	// counts 1/10 000 of the currency (no ISO 4217 currency has more than
	// four minor-unit digits).
	MoneyScale = 4
	// MaxAmount is the largest amount accepted, in whole currency units;
	// its Units (10^16) leave room to sum over 900 of them in an int64.
	MaxAmount = 1_000_000_000_000
	// UnknownCurrency is the canonical currency of an amount whose currency
	// is missing, null, empty, blank or unknown: ISO 4217's code for "no
	// currency". The bundled pack holds every such amount.
	UnknownCurrency = "XXX"
	// moneyUnit is one whole currency unit in Units.
	moneyUnit = 10_000
)

// amountReason is the refusal of an amount that is not a plain decimal.
var amountReason = fmt.Sprintf("must be a non-negative decimal number (a JSON number or a string such as \"4000.50\") "+
	"of at most %d decimal places and at most %d, without sign, exponent or separators", MoneyScale, int64(MaxAmount))

// money reads the amount and currency of params; nil when there is no
// params.amount.
func (v *validator) money(params map[string]any) *Money {
	raw, ok := params["amount"]
	if !ok || raw == nil {
		return nil
	}
	amount, units, ok := parseAmount(raw)
	if !ok {
		v.fail("params.amount", amountReason)
		return nil
	}
	m := &Money{Amount: amount, Units: units, Currency: UnknownCurrency}
	switch c := params["currency"].(type) {
	case nil:
	case string:
		m.RawCurrency = c
		m.Currency = CanonicalCurrency(c)
	default:
		v.fail("params.currency", "must be a string: an ISO 4217 currency code such as EUR")
	}
	return m
}

// parseAmount reads an amount, a JSON number (json.Number) or a string,
// exactly: the canonical decimal and its Units. A string is cleaned first
// (so full-width digits read as digits) and may have surrounding space.
func parseAmount(raw any) (amount string, units int64, ok bool) {
	var lit string
	switch a := raw.(type) {
	case json.Number:
		lit = string(a)
	case string:
		lit = Clean(a)
	default:
		return "", 0, false
	}
	intPart, frac, hasDot := strings.Cut(lit, ".")
	if !allDigits(intPart) || (hasDot && !allDigits(frac)) {
		return "", 0, false // sign, exponent, NaN, Infinity, separators, hex, empty
	}
	if len(intPart) > 1 && intPart[0] == '0' {
		return "", 0, false // 007: not a JSON number; refused in strings too
	}
	frac = strings.TrimRight(frac, "0")
	if len(frac) > MoneyScale || len(intPart) > len("1000000000000") {
		return "", 0, false
	}
	for _, c := range intPart + frac + strings.Repeat("0", MoneyScale-len(frac)) {
		units = units*10 + int64(c-'0') // at most 17 digits: no overflow
	}
	if units > MaxAmount*moneyUnit {
		return "", 0, false
	}
	amount = intPart
	if frac != "" {
		amount += "." + frac
	}
	return amount, units, true
}

// allDigits reports whether s is one or more ASCII digits.
func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// CanonicalCurrency folds a currency as sent into its ISO 4217 code:
// folded (case, compatibility forms, look-alikes), spacing removed, upper
// case. Anything that is not then an active ISO 4217 code (isoCurrencies),
// and the codes for no currency (XXX) and for testing (XTS), is
// UnknownCurrency.
func CanonicalCurrency(raw string) string {
	code := strings.ToUpper(strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, Fold(raw)))
	if _, ok := isoCurrencies[code]; !ok {
		return UnknownCurrency
	}
	return code
}

// isoCurrencies are the active ISO 4217 codes (the 2025 list, funds and
// precious metals included), less XXX and XTS.
var isoCurrencies = func() map[string]struct{} {
	const codes = "AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BOV BRL BSD " +
		"BTN BWP BYN BZD CAD CDF CHE CHF CHW CLF CLP CNY COP COU CRC CUC CUP CVE CZK DJF DKK DOP DZD EGP " +
		"ERN ETB EUR FJD FKP GBP GEL GHS GIP GMD GNF GTQ GYD HKD HNL HTG HUF IDR ILS INR IQD IRR ISK JMD " +
		"JOD JPY KES KGS KHR KMF KPW KRW KWD KYD KZT LAK LBP LKR LRD LSL LYD MAD MDL MGA MKD MMK MNT MOP " +
		"MRU MUR MVR MWK MXN MXV MYR MZN NAD NGN NIO NOK NPR NZD OMR PAB PEN PGK PHP PKR PLN PYG QAR RON " +
		"RSD RUB RWF SAR SBD SCR SDG SEK SGD SHP SLE SLL SOS SRD SSP STN SVC SYP SZL THB TJS TMT TND TOP " +
		"TRY TTD TWD TZS UAH UGX USD USN UYI UYU UYW UZS VED VES VND VUV WST XAF XAG XAU XBA XBB XBC XBD " +
		"XCD XCG XDR XOF XPD XPF XPT XSU XUA YER ZAR ZMW ZWG ZWL"
	set := map[string]struct{}{}
	for _, c := range strings.Fields(codes) {
		set[c] = struct{}{}
	}
	return set
}()
