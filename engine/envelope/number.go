package envelope

import "strconv"

// Numbers in params and context must mean the same to every JSON reader.
// JCS, and so params_hash, writes a number as the shortest decimal that
// round-trips its nearest IEEE 754 double; a reader that keeps numbers
// exactly (a big-number library, Python's int, a database column) sees the
// literal itself. Where the two differ, two literals hash alike and an
// approver may be shown another number than the one the agent acts on
// (9007199254740993 reads as 9007199254740992). So svc follows I-JSON
// (RFC 7493 §2.2) and refuses a number whose literal, as an exact decimal,
// is not the number JCS writes for it.

// inexactNumberReason is the refusal of such a number.
const inexactNumberReason = "number cannot be held exactly by an IEEE 754 double (RFC 7493); send it as a string"

// maxPlainDigits is how many digits an integer literal without fraction or
// exponent may have and still be exact without checking: every integer
// below 10^15 < 2^53 is a double, and no other decimal of as few digits
// rounds to it, so JCS writes it as it is.
const maxPlainDigits = 15

// maxShortestDigits is the most significant digits the shortest
// round-trip decimal of a double has.
const maxShortestDigits = 17

// The exponents, in 0.d₁d₂… form, of the largest double (1.8e308) and of
// the smallest (5e-324): a literal beyond them overflows or underflows.
const (
	maxDoubleExp = 309
	minDoubleExp = -323
)

// maxExponent caps the exponent read from a literal; a literal with a
// larger one is out of double range whatever its digits (no literal is
// long enough to bring it back), and the cap keeps the arithmetic in int64.
const maxExponent = 1e15

// exactNumber reports whether lit, a well-formed JSON number, is exactly
// the shortest round-trip decimal of its nearest double, the number JCS
// writes for it: 0.1, 1.50, -0, 1e20 and 100000000000000000000 are, while
// 9007199254740993, 1.00000000000000000001, 1e400 (overflow) and 1e-400
// (underflow) are not. It compares (sign, significant digits, exponent)
// as strings, so no literal, however long its digits or exponent, costs
// more than one pass and one strconv.ParseFloat.
func exactNumber(lit []byte) bool {
	d, zero := readDecimal(lit)
	if zero {
		return true // every zero, -0 and 0e999 included, is the double 0
	}
	if d.count > maxShortestDigits || d.exp > maxDoubleExp || d.exp < minDoubleExp {
		return false
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil || f == 0 { // out of range (±Inf), or underflow to zero
		return false
	}
	var buf [32]byte
	g, _ := readDecimal(strconv.AppendFloat(buf[:0], f, 'e', -1, 64))
	return d.neg == g.neg && d.exp == g.exp && d.count == g.count && sameDigits(d, g)
}

// decimal is a nonzero number as ±0.d₁d₂…dₙ × 10^exp, d₁ and dₙ nonzero:
// its digits are those of text from offset first on, skipping a '.'.
type decimal struct {
	text  []byte
	first int   // offset of d₁ in text
	count int   // n, the number of significant digits
	exp   int64 // the decimal exponent, capped near ±maxExponent
	neg   bool
}

// readDecimal normalises a well-formed JSON number: leading and trailing
// zeros stripped, the exponent adjusted. It reports zero when every digit
// is 0.
func readDecimal(b []byte) (d decimal, zero bool) {
	d.text = b
	i := 0
	if b[0] == '-' {
		d.neg = true
		i++
	}
	pos, intDigits, firstPos, lastPos := 0, 0, -1, -1
	dot := false
	for ; i < len(b) && b[i] != 'e' && b[i] != 'E'; i++ {
		c := b[i]
		if c == '.' {
			dot = true
			continue
		}
		if !dot {
			intDigits++
		}
		if c != '0' {
			if firstPos < 0 {
				d.first, firstPos = i, pos
			}
			lastPos = pos
		}
		pos++
	}
	if firstPos < 0 {
		return decimal{}, true
	}
	d.count = lastPos - firstPos + 1
	d.exp = int64(intDigits-firstPos) + exponent(b, i)
	return d, false
}

// exponent reads the exponent part of a number from offset i on (none at
// the end of b), capped at ±maxExponent.
func exponent(b []byte, i int) int64 {
	if i >= len(b) {
		return 0
	}
	i++ // e or E
	neg := b[i] == '-'
	if b[i] == '-' || b[i] == '+' {
		i++
	}
	var e int64
	for ; i < len(b) && e < maxExponent; i++ {
		e = e*10 + int64(b[i]-'0')
	}
	if neg {
		return -e
	}
	return e
}

// sameDigits reports whether a and b, of the same count, have the same
// significant digits.
func sameDigits(a, b decimal) bool {
	i, j := a.first, b.first
	for range a.count {
		if a.text[i] == '.' {
			i++
		}
		if b.text[j] == '.' {
			j++
		}
		if a.text[i] != b.text[j] {
			return false
		}
		i++
		j++
	}
	return true
}
