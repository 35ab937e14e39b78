package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Reasons of the member names decodeStrict refuses, worded as on
// /v1/decide (docs/api.md "No ambiguous keys").
const (
	reasonDuplicateKey = "duplicate key (keys must be unique)"
	reasonSpelling     = "field names are spelled exactly as documented: "
)

// invalidJSON is the 400 of a request body that is not the JSON object its
// route documents: {error: invalid_json, reason[, field]}.
func invalidJSON(reason, field string) *Error {
	e := &Error{Code: EINVALID, Name: "invalid_json", Message: reason}
	if field != "" {
		e.Fields = map[string]any{"field": field}
	}
	return e
}

// decodeStrict decodes body into v, refusing what JSON readers disagree on.
// body must be exactly one JSON object followed only by whitespace; every
// member name must be one of fields, spelled exactly (no case variant, no
// name that matches only after Unicode folding, no unknown name), where a
// member of a nested object is given as "parent.name"; no object may name a
// member twice, names being compared after their escapes are decoded.
// usage is the reason given when the body is not such an object; a refused
// member name is reported by its path in field. Errors are *Error values
// built by invalidJSON.
func decodeStrict(body []byte, v any, usage string, fields ...string) error {
	if !json.Valid(body) || !bytes.HasPrefix(bytes.TrimLeft(body, " \t\r\n"), []byte("{")) {
		return invalidJSON(usage, "")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	s := memberCheck{dec: dec, fields: fields}
	if err := s.value(""); err != nil {
		var e *Error
		if errors.As(err, &e) {
			return e
		}
		return invalidJSON(usage, "")
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return invalidJSON(usage, te.Field)
		}
		return invalidJSON(usage, "")
	}
	return nil
}

// parentPath returns the path of the object a dotted field path is a
// member of: "principal" for "principal.type", "" (the top level) for
// "decision".
func parentPath(field string) string {
	if i := strings.LastIndexByte(field, '.'); i >= 0 {
		return field[:i]
	}
	return ""
}

// memberCheck walks the tokens of a valid JSON document, checking the
// member names of every object against the documented field paths.
type memberCheck struct {
	dec    *json.Decoder
	fields []string
}

// value reads one value found at path; its objects and arrays are walked.
func (s *memberCheck) value(path string) error {
	tok, err := s.dec.Token()
	if err != nil {
		return fmt.Errorf("read value at %q: %w", path, err)
	}
	switch tok {
	case json.Delim('{'):
		if path != "" && !s.hasMembers(path) {
			return s.skip(path) // not an object of the body: a type error, named by Unmarshal
		}
		return s.object(path)
	case json.Delim('['):
		for s.dec.More() {
			if err := s.value(path); err != nil {
				return err
			}
		}
		return s.closing(path)
	}
	return nil
}

// object checks the members of the object at path, whose '{' was read.
func (s *memberCheck) object(path string) error {
	seen := map[string]bool{}
	for s.dec.More() {
		tok, err := s.dec.Token()
		if err != nil {
			return fmt.Errorf("read member name at %q: %w", path, err)
		}
		name, _ := tok.(string)
		member := memberPath(path, name)
		if seen[name] {
			return invalidJSON(reasonDuplicateKey, member)
		}
		if !slices.Contains(s.fields, member) || strings.Contains(name, ".") {
			return invalidJSON(reasonSpelling+s.documented(path), member)
		}
		seen[name] = true
		if err := s.value(member); err != nil {
			return err
		}
	}
	return s.closing(path)
}

// hasMembers reports whether the body documents members of an object at
// path.
func (s *memberCheck) hasMembers(path string) bool {
	return slices.ContainsFunc(s.fields, func(f string) bool { return parentPath(f) == path && strings.Contains(f, ".") })
}

// skip reads the rest of the container at path, whose opening delimiter
// was read.
func (s *memberCheck) skip(path string) error {
	for depth := 1; depth > 0; {
		tok, err := s.dec.Token()
		if err != nil {
			return fmt.Errorf("read value at %q: %w", path, err)
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}

// closing reads the '}' or ']' that ends the container at path.
func (s *memberCheck) closing(path string) error {
	if _, err := s.dec.Token(); err != nil {
		return fmt.Errorf("read end of %q: %w", path, err)
	}
	return nil
}

// documented lists the member names allowed in the object at path, in
// their documented order.
func (s *memberCheck) documented(path string) string {
	var out []string
	for _, f := range s.fields {
		if parentPath(f) == path {
			out = append(out, f)
		}
	}
	return strings.Join(out, ", ")
}

// memberPath returns the path of member name of the object at path.
func memberPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
