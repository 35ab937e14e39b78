// Package ijson checks that a request body keeps to the text rules of
// I-JSON (RFC 7493 §2.1): it is UTF-8 without an invalid byte sequence (an
// overlong form, an encoded surrogate, a truncated sequence, a stray
// continuation byte) and no string escapes a lone surrogate (\ud800 not
// followed by a low surrogate, or \udc00 alone).
//
// encoding/json, and every reader built on its string decoding, replaces
// each of these by U+FFFD without a word. Two bodies that differ only
// there then read the same, so an approval shown as "acct-\ufffd" would
// cover every byte an agent might put in its place. svc refuses them
// before any other reading of the body, in every body it parses.
package ijson

import (
	"fmt"
	"unicode/utf8"
)

// Error is the position and nature of the first violation in a body.
type Error struct {
	// Offset is the byte offset, from 0, of the first byte of the
	// offending sequence or escape.
	Offset int
	// Problem says what is wrong there.
	Problem string
}

// Error implements error.
func (e *Error) Error() string {
	return fmt.Sprintf("%s at byte offset %d (RFC 7493 I-JSON)", e.Problem, e.Offset)
}

// Problems reported in Error.Problem.
const (
	ProblemUTF8          = "invalid UTF-8"
	ProblemLoneSurrogate = "lone surrogate escape"
)

// Check returns an *Error for the first invalid UTF-8 sequence or escaped
// lone surrogate of body, or nil. It does not check the JSON grammar,
// which the parser that follows does: a backslash is read as starting an
// escape wherever it stands, as it can only stand in a string in a
// well-formed document.
func Check(body []byte) error {
	for i := 0; i < len(body); {
		c := body[i]
		switch {
		case c < utf8.RuneSelf && c != '\\':
			i++
		case c == '\\':
			n, ok := escape(body[i:])
			if !ok {
				return &Error{Offset: i, Problem: ProblemLoneSurrogate}
			}
			i += n
		default:
			r, n := utf8.DecodeRune(body[i:])
			if r == utf8.RuneError && n <= 1 {
				return &Error{Offset: i, Problem: ProblemUTF8}
			}
			i += n
		}
	}
	return nil
}

// escape returns how many bytes of b, which starts with a backslash, are
// read as an escape, and false when it is a lone surrogate. Only an escaped
// backslash and a \u escape are read whole; after any other backslash the
// next byte is checked like any other. A malformed escape is left to the
// parser.
func escape(b []byte) (int, bool) {
	if len(b) < 2 || (b[1] != 'u' && b[1] != '\\') {
		return 1, true
	}
	if b[1] == '\\' {
		return 2, true
	}
	r, ok := hex4(b[2:])
	switch {
	case !ok:
		return 2, true
	case r >= 0xdc00 && r <= 0xdfff:
		return 0, false
	case r < 0xd800 || r > 0xdbff:
		return 6, true
	}
	if len(b) < 12 || b[6] != '\\' || b[7] != 'u' {
		return 0, false
	}
	if lo, ok := hex4(b[8:]); !ok || lo < 0xdc00 || lo > 0xdfff {
		return 0, false
	}
	return 12, true
}

// hex4 reads the four hex digits b starts with.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
