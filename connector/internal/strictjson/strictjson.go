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
	"fmt"
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
	dec := json.NewDecoder(bytes.NewReader(raw))
	_ = walk(dec, "", func(member string) {
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
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := walk(dec, "", func(string) {}); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return &Error{Reason: "must be exactly one JSON value"}
	}
	return nil
}

// walk reads one value from dec, checking the objects inside it and
// calling visit with the path of each member.
func walk(dec *json.Decoder, path string, visit func(member string)) error {
	tok, err := dec.Token()
	if err != nil {
		return &Error{Field: path, Reason: "not well-formed JSON"}
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return &Error{Field: path, Reason: "not well-formed JSON"}
			}
			name, _ := k.(string)
			member := join(path, name)
			if seen[name] {
				return &Error{Field: member, Reason: "duplicate key (keys must be unique)"}
			}
			seen[name] = true
			visit(member)
			if err := walk(dec, member, visit); err != nil {
				return err
			}
		}
		_, err = dec.Token()
	case json.Delim('['):
		for dec.More() {
			if err := walk(dec, path+"[]", visit); err != nil {
				return err
			}
		}
		_, err = dec.Token()
	}
	if err != nil {
		return &Error{Field: path, Reason: "not well-formed JSON"}
	}
	return nil
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return fmt.Sprintf("%s.%s", path, name)
}
