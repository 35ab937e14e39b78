// Package strictjson decodes the JSON documents the connector reads — the
// gateway's request bodies, the batch route's body, the tenancy and tool
// maps, the engine's answers — refusing what JSON readers disagree on: a
// member named twice in one object (one reader keeps the first, another the
// last), a member spelled in another case than the struct field
// encoding/json would fill with it (the gateway's reader matches names
// exactly), and data after the document.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"slices"
	"strconv"
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
// A refusal is an *Error naming the member; on a refusal v may hold part
// of the document.
//
// The decoder reads the document once and checks it is well-formed; the
// duplicate scan then walks the well-formed document. A document the
// decoder refuses is checked as CheckDuplicates does first, so that a
// malformed document or a duplicate member is named the same whatever
// else is wrong.
func Decode(raw []byte, v any, known bool) error {
	if err := decode(raw, v, known); err != nil {
		if derr := CheckDuplicates(raw); derr != nil {
			return derr
		}
		return withPath(raw, err)
	}
	return scan(raw, shapeOf(reflect.TypeOf(v)), nil) // well-formed: decode read one value and nothing after it
}

// decode decodes raw into v, refusing data after the one value.
func decode(raw []byte, v any, known bool) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if known {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return typeError(raw, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return &Error{Reason: "must be exactly one JSON value"}
	}
	return nil
}

// typeError turns a decoding error of raw into an *Error naming its
// field. A value of the wrong type is named by its path in raw, with map
// keys and array indices ("tenants.acme.environment", "tool_calls[0].id"),
// which encoding/json's own field name leaves out.
func typeError(raw []byte, err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if p := pathAt(raw, int(te.Offset)); p != "" {
			field = p
		}
		return &Error{Field: field, Reason: "must be " + article(te.Type.Kind().String())}
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
	case "int", "int64", "uint", "uint64":
		return "an integer"
	case "float64":
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
	_ = scan(raw, nil, func(_ int, path func() string) {
		if member := path(); found == "" && (member == e.Field || strings.HasSuffix(member, "."+e.Field)) {
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
	return scan(raw, nil, nil)
}

// frame is an object or array being scanned.
type frame struct {
	object    bool
	expectKey bool     // the next string is a member name
	member    string   // the last member name read
	index     int      // of an array, the element being read
	keys      []string // the member names read, while few
	set       map[string]bool
	shape     *shape // what the object or array is decoded into (nil: free)
}

// fewKeys is how many member names an object keeps in a list, searched
// in order, before it keeps them in a map.
const fewKeys = 16

// seen records name in f and reports whether f had read it already.
func (f *frame) seen(name string) bool {
	if f.set != nil {
		if f.set[name] {
			return true
		}
		f.set[name] = true
		return false
	}
	if slices.Contains(f.keys, name) {
		return true
	}
	f.keys = append(f.keys, name)
	if len(f.keys) > fewKeys {
		f.set = make(map[string]bool, 2*fewKeys)
		for _, k := range f.keys {
			f.set[k] = true
		}
		f.keys = nil
	}
	return false
}

// pathOf is the path of the value being read in the innermost frame of
// stack: members joined by ".", the index of an array element in brackets
// ("x[2].k").
func pathOf(stack []frame) string {
	path := ""
	for _, f := range stack {
		if f.object {
			path = join(path, f.member)
		} else {
			path += "[" + strconv.Itoa(f.index) + "]"
		}
	}
	return path
}

// pathAt is the path of the innermost value of the well-formed document
// raw that starts before offset ("" for the document itself): the value
// encoding/json was reading when it reported an error at offset.
func pathAt(raw []byte, offset int) string {
	stack := make([]frame, 0, 8)
	expectValue, last := true, ""
	for i := 0; i < len(raw) && i < offset; i++ {
		c := raw[i]
		if expectValue && c != ' ' && c != '\t' && c != '\r' && c != '\n' && c != ']' {
			expectValue, last = false, pathOf(stack)
		}
		switch c {
		case '{':
			stack = append(stack, frame{object: true, expectKey: true})
		case '[':
			stack = append(stack, frame{})
			expectValue = true
		case '}', ']':
			stack = stack[:len(stack)-1]
		case ':':
			expectValue = true
		case ',':
			if top := &stack[len(stack)-1]; top.object {
				top.expectKey = true
			} else {
				top.index++
				expectValue = true
			}
		case '"':
			end := stringEnd(raw, i)
			if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].expectKey {
				stack[n-1].member, stack[n-1].expectKey = memberName(raw[i:end+1]), false
			}
			i = end
		}
	}
	return last
}

// scan walks the well-formed JSON document raw byte by byte, refusing a
// member named twice in one object, and, where root (the shape of the
// value raw is decoded into; nil: none) has a struct, a member that
// encoding/json would take for one of its fields though it is spelled
// otherwise ("Name" for "name"): a reader that matches names exactly, as
// the gateway's does, would see another document. visit, when not nil, is
// called for each member with the depth of its object (1 at the top) and a
// function that gives its path.
func scan(raw []byte, root *shape, visit func(depth int, path func() string)) error {
	stack := make([]frame, 0, 8)
	path := func() string { return pathOf(stack) }
	next := root // the shape of the next value to open
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; c {
		case '{':
			stack = append(stack, frame{object: true, expectKey: true, shape: next})
		case '[':
			stack = append(stack, frame{shape: next})
			next = next.element()
		case '}', ']':
			stack = stack[:len(stack)-1]
		case ',':
			if top := &stack[len(stack)-1]; top.object {
				top.expectKey = true
			} else {
				top.index++
				next = top.shape.element()
			}
		case '"':
			end := stringEnd(raw, i)
			if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].expectKey {
				top := &stack[n-1]
				name := memberName(raw[i : end+1])
				top.member, top.expectKey = name, false
				if top.seen(name) {
					return &Error{Field: pathOf(stack), Reason: "duplicate key (keys must be unique)"}
				}
				var field string
				if next, field = top.shape.member(name); field != "" {
					return &Error{Field: pathOf(stack), Reason: "member names are spelled exactly: " + field}
				}
				if visit != nil {
					visit(n, path)
				}
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
	if !json.Valid(raw) || !isObject(raw) {
		return &Error{Reason: "must be a JSON object"}
	}
	var bad *Error
	_ = scan(raw, nil, func(depth int, path func() string) {
		if depth != 1 || bad != nil {
			return
		}
		if m := path(); misspelt(m, names) != "" {
			bad = &Error{Field: m, Reason: "member names are spelled exactly: " + misspelt(m, names)}
		}
	})
	if bad != nil {
		return bad
	}
	return nil
}

// DecodeSpelled is CheckSpelling of names followed by Decode (known
// false), in one pass over raw where the document is well-formed.
func DecodeSpelled(raw []byte, v any, names ...string) error {
	if err := decode(raw, v, false); err != nil {
		if serr := CheckSpelling(raw, names...); serr != nil {
			return serr
		}
		return Decode(raw, v, false)
	}
	if !isObject(raw) {
		return &Error{Reason: "must be a JSON object"}
	}
	var bad *Error
	err := scan(raw, shapeOf(reflect.TypeOf(v)), func(depth int, path func() string) {
		if depth == 1 && bad == nil {
			if m := path(); misspelt(m, names) != "" {
				bad = &Error{Field: m, Reason: "member names are spelled exactly: " + misspelt(m, names)}
			}
		}
	})
	if bad != nil {
		return bad
	}
	return err
}

// misspelt is the name of names that encoding/json would take member for
// though it is spelled otherwise, "" if none.
func misspelt(member string, names []string) string {
	for _, n := range names {
		if member != n && strings.EqualFold(member, n) {
			return n
		}
	}
	return ""
}

// isObject reports whether the well-formed document raw is an object.
func isObject(raw []byte) bool {
	t := bytes.TrimLeft(raw, " \t\r\n")
	return len(t) > 0 && t[0] == '{'
}
