package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// This file holds the JSON grammar as encoding/json accepts it: the lexing
// of keyScanner, which checks every byte, the decoding of strings exactly as
// encoding/json decodes them, and wireReader, which reads the values of a
// document keyScanner has already checked.

// errSyntax stops keyScanner at the first byte that breaks the grammar.
var errSyntax = errors.New("json syntax error")

// isSpace reports whether c is JSON white space.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (s *keyScanner) skipSpace() {
	for s.pos < len(s.data) && isSpace(s.data[s.pos]) {
		s.pos++
	}
}

// plainBytes marks the bytes that stand for themselves in a string:
// printable ASCII but the quote and the backslash.
var plainBytes = func() (t [256]bool) {
	for c := ' '; c <= '~'; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str reads a string and returns its raw content, between the quotes, and
// whether that is plain: printable ASCII without escapes, its own decoding.
func (s *keyScanner) str() (raw []byte, plain bool, err error) {
	start, i := s.pos+1, s.pos+1
	for i < len(s.data) && plainBytes[s.data[i]] {
		i++
	}
	if i < len(s.data) && s.data[i] == '"' {
		s.pos = i + 1
		return s.data[start:i], true, nil
	}
	return s.strRest(start, i)
}

// strRest finishes a string from offset i on, past escapes or non-ASCII.
func (s *keyScanner) strRest(start, i int) ([]byte, bool, error) {
	for ; i < len(s.data); i++ {
		switch c := s.data[i]; {
		case c == '"':
			s.pos = i + 1
			return s.data[start:i], false, nil
		case c == '\\':
			n := escapeLen(s.data[i:])
			if n == 0 {
				return nil, false, errSyntax
			}
			i += n - 1
		case c < 0x20:
			return nil, false, errSyntax
		}
	}
	return nil, false, errSyntax
}

// escapeLen is the length of the valid escape sequence that b starts with,
// or 0.
func escapeLen(b []byte) int {
	if len(b) < 2 {
		return 0
	}
	switch b[1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2
	case 'u':
		if getu4(b) >= 0 {
			return 6
		}
	}
	return 0
}

// number reads a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
// and checks it (checkNumber).
func (s *keyScanner) number() error {
	d, i := s.data, s.pos
	plain := true // no fraction, no exponent
	if i < len(d) && d[i] == '-' {
		i++
	}
	digits := i
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && '1' <= d[i] && d[i] <= '9':
		i = skipDigits(d, i+1)
	default:
		return errSyntax
	}
	if i < len(d) && d[i] == '.' {
		plain = false
		if i = skipDigits(d, i+1); d[i-1] == '.' {
			return errSyntax
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		plain = false
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if j := skipDigits(d, i); j > i {
			i = j
		} else {
			return errSyntax
		}
	}
	if len(s.stack) > 1 && s.stack[1].numbers && !(plain && i-digits <= maxPlainDigits) {
		s.checkNumber(d[s.pos:i])
	}
	s.pos = i
	return nil
}

// skipDigits returns the offset of the first non-digit at or after i.
func skipDigits(d []byte, i int) int {
	for i < len(d) && '0' <= d[i] && d[i] <= '9' {
		i++
	}
	return i
}

// literal reads true, false or null.
func (s *keyScanner) literal(word string) error {
	end := s.pos + len(word)
	if end > len(s.data) || string(s.data[s.pos:end]) != word {
		return errSyntax
	}
	s.pos = end
	return nil
}

// getu4 decodes the \uXXXX escape that s starts with, or returns -1.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// unquote decodes the raw content of a well-formed string as encoding/json
// does: escapes resolved, and each invalid UTF-8 byte, lone surrogate or
// broken surrogate pair replaced by U+FFFD. Without escapes or invalid
// UTF-8 it returns s itself.
func unquote(s []byte) []byte {
	if bytes.IndexByte(s, '\\') < 0 && utf8.Valid(s) {
		return s
	}
	b := make([]byte, 0, len(s)+2*utf8.UTFMax)
	for r := 0; r < len(s); {
		switch c := s[r]; {
		case c == '\\':
			var n int
			b, n = appendEscape(b, s[r:])
			r += n
		case c < utf8.RuneSelf:
			b = append(b, c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			b = utf8.AppendRune(b, rr)
			r += size
		}
	}
	return b
}

// escapes maps the one-letter escapes to the bytes they stand for.
var escapes = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// appendEscape appends the decoding of the valid escape sequence s starts
// with (a surrogate pair counting as one) and returns its length.
func appendEscape(b, s []byte) ([]byte, int) {
	if s[1] != 'u' {
		return append(b, escapes[s[1]]), 2
	}
	rr := getu4(s)
	if !utf16.IsSurrogate(rr) {
		return utf8.AppendRune(b, rr), 6
	}
	if pair := utf16.DecodeRune(rr, getu4(s[6:])); pair != unicode.ReplacementChar {
		return utf8.AppendRune(b, pair), 12
	}
	return utf8.AppendRune(b, unicode.ReplacementChar), 6
}

// wireReader reads the values of a document keyScanner accepted; it relies
// on that and checks nothing itself.
type wireReader struct {
	data []byte
	pos  int
}

func (r *wireReader) space() {
	for r.pos < len(r.data) && isSpace(r.data[r.pos]) {
		r.pos++
	}
}

// str reads a string and returns its raw content.
func (r *wireReader) str() []byte {
	start := r.pos + 1
	i := start
	for r.data[i] != '"' {
		if r.data[i] == '\\' {
			i++
		}
		i++
	}
	r.pos = i + 1
	return r.data[start:i]
}

// skip moves past one value and returns it.
func (r *wireReader) skip() []byte {
	r.space()
	start := r.pos
	switch r.data[r.pos] {
	case '"':
		r.str()
	case '{', '[':
		r.skipContainer()
	default:
		r.scalar()
	}
	return r.data[start:r.pos]
}

// skipContainer moves past the array or object at the reader.
func (r *wireReader) skipContainer() {
	for depth := 0; ; {
		switch r.data[r.pos] {
		case '"':
			r.str()
			continue
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		}
		r.pos++
		if depth == 0 {
			return
		}
	}
}

// scalar reads a number or literal and returns it.
func (r *wireReader) scalar() []byte {
	start := r.pos
	for r.pos < len(r.data) && !isSpace(r.data[r.pos]) && !isValueEnd(r.data[r.pos]) {
		r.pos++
	}
	return r.data[start:r.pos]
}

func isValueEnd(c byte) bool { return c == ',' || c == ']' || c == '}' }

// members calls fn with the decoded key of each member of the object at
// the reader, leaving the reader at the member's value, which fn reads.
func (r *wireReader) members(fn func(key []byte)) {
	r.space()
	r.pos++ // {
	for r.space(); r.data[r.pos] != '}'; r.space() {
		if r.data[r.pos] == ',' {
			r.pos++
			r.space()
		}
		key := unquote(r.str())
		r.space()
		r.pos++ // :
		r.space()
		fn(key)
	}
	r.pos++
}

// value decodes the value at the reader as encoding/json decodes into an
// interface with UseNumber: objects, arrays, strings, json.Number, bool, nil.
func (r *wireReader) value() any {
	r.space()
	switch r.data[r.pos] {
	case '{':
		m := map[string]any{}
		r.members(func(key []byte) { m[string(key)] = r.value() })
		return m
	case '[':
		a := make([]any, 0)
		r.pos++
		for r.space(); r.data[r.pos] != ']'; r.space() {
			if r.data[r.pos] == ',' {
				r.pos++
			}
			a = append(a, r.value())
		}
		r.pos++
		return a
	case '"':
		return string(unquote(r.str()))
	}
	switch lit := r.scalar(); lit[0] {
	case 't', 'f':
		return lit[0] == 't'
	case 'n':
		return nil
	default:
		return json.Number(lit)
	}
}
