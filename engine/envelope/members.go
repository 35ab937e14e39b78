package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// JSONString decodes value, a valid JSON value, if it is a string.
func JSONString(value json.RawMessage) (string, bool) {
	if value[0] != '"' {
		return "", false
	}
	if inner := value[1 : len(value)-1]; bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), true
	}
	var s string
	return s, json.Unmarshal(value, &s) == nil
}

// errNotObject is the refusal of a document that is not a JSON object.
var errNotObject = errors.New("not a JSON object")

// ExactMembers reads the object doc (null reads as an object without
// members: OPA writes an undefined document as null, which the verdict
// readers take for one without the members they look for) and sets
// values[i] to the value of its member names[i], or nil when it has none,
// with ObjectScanner.Match.
func ExactMembers(doc []byte, names []string, values []json.RawMessage) error {
	s, err := scanMembers(doc, true)
	if err != nil {
		return err
	}
	return s.Match(names, values)
}

// Match reads the members left to s and sets values[i], nil on entry, to
// the value of its member names[i], or leaves it nil when it has none. Names are matched
// exactly, unlike encoding/json, which also matches a name in another case
// or under Unicode folding ("Decision", "deciſion") and keeps the last of
// duplicates. So a member that appears twice, or spells one of names
// another way (see spelledName), is refused with a *MemberFault: two
// readers could disagree on the document. Other members are ignored.
func (s *ObjectScanner) Match(names []string, values []json.RawMessage) error {
	var array [8][]byte // a verdict has three members: no allocation on the decision path
	keys := array[:0]
	var seen KeySet
	for quoted, value, ok := s.Next(); ok; quoted, value, ok = s.Next() {
		key := MemberName(quoted)
		i := nameIndex(key, names)
		var dup bool
		keys, dup = seen.Add(keys, key)
		switch {
		case dup:
			f := &MemberFault{Twice: true}
			if i >= 0 {
				f.Name = names[i]
			}
			return f
		case i >= 0:
			values[i] = value
		default:
			if name, ok := spelledName(key, names); ok {
				return &MemberFault{Key: string(key), Name: name}
			}
		}
	}
	return nil
}

// MemberNames returns the member names of the JSON object doc in document
// order, escapes decoded as encoding/json decodes them, duplicates kept:
// what decoding into a map hides. A doc that is not exactly one JSON
// object, null included, is refused with an error saying it is not a JSON
// object.
func MemberNames(doc []byte) ([]string, error) {
	s, err := ScanObject(doc)
	if err != nil {
		return nil, err
	}
	var names []string
	for quoted, _, ok := s.Next(); ok; quoted, _, ok = s.Next() {
		names = append(names, string(MemberName(quoted)))
	}
	return names, nil
}

// MemberFault is why Match refused a document: a member that appears
// twice (Twice; Name is the one of its names, "" for another member, whose
// name is not repeated here: it may be anything a sender wrote), or Key,
// which spells Name another way.
type MemberFault struct {
	Key, Name string
	Twice     bool
}

// Error names the member at fault.
func (f *MemberFault) Error() string {
	switch {
	case f.Twice && f.Name == "":
		return "a member appears twice"
	case f.Twice:
		return fmt.Sprintf("member %q appears twice", f.Name)
	}
	return fmt.Sprintf("member %q spells %q another way", f.Key, f.Name)
}

// MemberName decodes a member's quoted key as encoding/json does: escapes
// decoded, invalid UTF-8 read as U+FFFD.
func MemberName(quoted []byte) []byte {
	if inner := quoted[1 : len(quoted)-1]; bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return inner
	}
	key, _ := JSONString(quoted) // a valid JSON string always decodes
	return []byte(key)
}

// nameIndex returns the index of key in names, or -1.
func nameIndex(key []byte, names []string) int {
	for i, name := range names {
		if string(key) == name {
			return i
		}
	}
	return -1
}

// spelledName returns the one of names (lower-case ASCII names) that key,
// none of them, reads as (misspelling), compared once Folded: compatibility
// forms such as full-width letters, invisible characters and look-alikes
// removed.
func spelledName(key []byte, names []string) (string, bool) {
	if lowerASCII(key) {
		return "", false
	}
	k := string(key)
	return misspelling(k, Fold(k), names)
}

// ObjectScanner walks the members of a JSON object that json.Valid has
// accepted, so it needs no error checks of its own.
type ObjectScanner struct {
	data []byte
	pos  int
}

// ScanObject checks that doc is one JSON value, an object, and returns a
// scanner of its members.
func ScanObject(doc []byte) (ObjectScanner, error) {
	return scanMembers(doc, false)
}

// scanMembers checks that doc is one JSON value, an object or, when null is
// set, null, which reads as an object without members; and returns a
// scanner of its members.
func scanMembers(doc []byte, null bool) (ObjectScanner, error) {
	if !json.Valid(doc) {
		return ObjectScanner{}, errNotObject
	}
	s := ObjectScanner{data: doc}
	s.space()
	switch {
	case doc[s.pos] == '{':
		s.pos++
	case null && doc[s.pos] == 'n':
		s.pos = len(doc)
	default:
		return ObjectScanner{}, errNotObject
	}
	return s, nil
}

// Next returns the quoted key and the value of the next member, both as
// they stand in the document; ok is false past the last one.
func (s *ObjectScanner) Next() (key, value []byte, ok bool) {
	s.space()
	if s.pos >= len(s.data) || s.data[s.pos] == '}' {
		return nil, nil, false
	}
	if s.data[s.pos] == ',' {
		s.pos++
		s.space()
	}
	start := s.pos
	s.skipString()
	key = s.data[start:s.pos]
	s.space()
	s.pos++ // the colon
	s.space()
	start = s.pos
	s.skipValue()
	return key, s.data[start:s.pos], true
}

// space skips JSON white space.
func (s *ObjectScanner) space() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// skipString moves past the string that starts at pos.
func (s *ObjectScanner) skipString() {
	for s.pos++; s.data[s.pos] != '"'; s.pos++ {
		if s.data[s.pos] == '\\' {
			s.pos++
		}
	}
	s.pos++
}

// skipValue moves past the value that starts at pos.
func (s *ObjectScanner) skipValue() {
	depth := 0
	for {
		switch s.data[s.pos] {
		case '"':
			s.skipString()
		case '{', '[':
			depth++
			s.pos++
		case '}', ']':
			depth--
			s.pos++
		default:
			if depth == 0 {
				s.skipScalar()
				return
			}
			s.pos++
		}
		if depth == 0 {
			return
		}
	}
}

// skipScalar moves past the number, true, false or null that starts at pos.
func (s *ObjectScanner) skipScalar() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return
		}
		s.pos++
	}
}
