// Package strictjson decodes the JSON documents the connector reads — the
// gateway's request bodies, the batch route's body, the tenancy and tool
// maps, the engine's answers — refusing what JSON readers disagree on: a
// member named twice in one object (one reader keeps the first, another the
// last) and data after the document.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
)

// Error is a refused document; Field is the path of the member at fault
// ("" for the document as a whole).
type Error struct {
	Field  string
	Reason string
}

// Error implements error.
func (e *Error) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}

// Decode decodes raw, one JSON value followed only by whitespace, into v.
// No object may name a member twice (names compared after their escapes
// are decoded). With known true, a member v does not declare is refused.
// A refusal is an *Error naming the member.
func Decode(raw []byte, v any, known bool) error {
	if err := CheckDuplicates(raw); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if known {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return withPath(raw, typeError(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return &Error{Reason: "must be exactly one JSON value"}
	}
	return nil
}

// typeError turns a decoding error into an *Error naming its field.
func typeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return &Error{Field: te.Field, Reason: "must be " + article(te.Type.Kind().String())}
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return &Error{Field: strings.Trim(name, `"`), Reason: "unknown member"}
	}
	return &Error{Reason: "not well-formed JSON: " + err.Error()}
}

func article(kind string) string {
	switch kind {
	case "slice":
		return "an array"
	case "map", "struct", "ptr":
		return "an object"
	case "int", "int64", "float64":
		return "a number"
	case "bool":
		return "a boolean"
	}
	return "a " + kind
}

// withPath completes the field of an unknown member, which encoding/json
// names without its path, with the path of its first occurrence.
func withPath(raw []byte, err error) error {
	var e *Error
	if !errors.As(err, &e) || e.Reason != "unknown member" || strings.Contains(e.Field, ".") {
		return err
	}
	found := ""
	_ = scan(raw, func(member string) {
		if found == "" && (member == e.Field || strings.HasSuffix(member, "."+e.Field)) {
			found = member
		}
	})
	if found != "" {
		e.Field = found
	}
	return e
}

// CheckDuplicates refuses a document in which an object names a member
// twice, or which is not one well-formed JSON value.
func CheckDuplicates(raw []byte) error {
	if !json.Valid(raw) {
		return &Error{Reason: "not well-formed JSON (exactly one JSON value)"}
	}
	return scan(raw, func(string) {})
}

// frame is an object or array being scanned.
type frame struct {
	object    bool
	path      string // of the object or array ("" at the top, "x[]" for x's elements)
	expectKey bool   // the next string is a member name
	member    string // the last member name read
	keys      map[string]bool
}

// scan walks the valid JSON document raw byte by byte, calling visit with
// the path of each member and refusing a member named twice in one object.
func scan(raw []byte, visit func(member string)) error {
	var stack []*frame
	childPath := func() string {
		if len(stack) == 0 {
			return ""
		}
		top := stack[len(stack)-1]
		if top.object {
			return join(top.path, top.member)
		}
		return top.path
	}
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; c {
		case '{':
			stack = append(stack, &frame{object: true, path: childPath(), expectKey: true, keys: map[string]bool{}})
		case '[':
			stack = append(stack, &frame{path: childPath() + "[]"})
		case '}', ']':
			stack = stack[:len(stack)-1]
		case ',':
			if top := stack[len(stack)-1]; top.object {
				top.expectKey = true
			}
		case '"':
			end := stringEnd(raw, i)
			if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].expectKey {
				top := stack[n-1]
				name := memberName(raw[i : end+1])
				member := join(top.path, name)
				if top.keys[name] {
					return &Error{Field: member, Reason: "duplicate key (keys must be unique)"}
				}
				top.keys[name], top.member, top.expectKey = true, name, false
				visit(member)
			}
			i = end
		}
	}
	return nil
}

// memberName decodes the valid JSON string quoted as a member name. A name
// of printable ASCII without escapes, as nearly all are, is its bytes; any
// other is decoded by encoding/json, escapes and invalid UTF-8 (replaced
// by U+FFFD) as the decoder of the document reads them, so that two names
// the decoder would read alike are always caught as one.
func memberName(quoted []byte) string {
	plain := quoted[1 : len(quoted)-1]
	for _, c := range plain {
		if c < ' ' || c > '~' || c == '\\' {
			var name string
			_ = json.Unmarshal(quoted, &name) // valid: json.Valid passed
			return name
		}
	}
	return string(plain)
}

// stringEnd is the index of the closing quote of the string opening at i.
func stringEnd(raw []byte, i int) int {
	for j := i + 1; j < len(raw); j++ {
		switch raw[j] {
		case '\\':
			j++
		case '"':
			return j
		}
	}
	return len(raw) - 1
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// CheckSpelling refuses a top-level member of the object raw that
// encoding/json would take for one of names (it matches names without
// regard to case, Unicode folding included: "Decision", "deciſion") but
// that is not spelled exactly so: a reader that matches exactly would see
// another document.
func CheckSpelling(raw []byte, names ...string) error {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return &Error{Reason: "must be a JSON object"}
	}
	for m := range members {
		for _, n := range names {
			if m != n && strings.EqualFold(m, n) {
				return &Error{Field: m, Reason: "member names are spelled exactly: " + n}
			}
		}
	}
	return nil
}
