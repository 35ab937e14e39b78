package api

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/envelope"
	"github.com/svc-dev/svc/engine/ijson"
)

// invalidJSON is the 400 of a request body that is not the JSON object its
// route documents: {error: invalid_json, reason[, field]}.
func invalidJSON(reason, field string) *engine.Error {
	e := &engine.Error{Code: engine.EINVALID, Name: "invalid_json", Message: reason}
	if field != "" {
		e.Fields = map[string]any{"field": field}
	}
	return e
}

// invalidText is the 400 of a body that breaks I-JSON's text rules: its
// reason and offset name the first offending byte.
func invalidText(err error) *engine.Error {
	e := invalidJSON(err.Error(), "")
	if ie, ok := errors.AsType[*ijson.Error](err); ok {
		e.Fields = map[string]any{"offset": ie.Offset}
	}
	return e
}

// decodeStrict decodes body into v, refusing what JSON readers disagree on.
// body must keep to I-JSON's text rules (ijson.Check) and be exactly one JSON object followed only by whitespace; every
// member name must be one of fields, spelled exactly (no case variant, no
// name that matches only after Unicode folding, no unknown name), where a
// member of a nested object is given as "parent.name"; no object may name a
// member twice, names being compared after their escapes are decoded.
// usage is the reason given when the body is not such an object; a refused
// member name is reported by its path in field. Errors are *Error values
// built by invalidJSON.
func decodeStrict(body []byte, v any, usage string, fields ...string) error {
	if err := ijson.Check(body); err != nil {
		return invalidText(err)
	}
	if err := checkMembers(body, "", fields); err != nil {
		var e *engine.Error
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

// checkMembers checks the member names of the object doc found at path
// against fields, and those of its members that are objects with
// documented members of their own. A member that is an object where none is
// documented is left to the type check of json.Unmarshal, which names it.
// A doc that is not an object is refused (envelope.ScanObject).
func checkMembers(doc []byte, path string, fields []string) error {
	s, err := envelope.ScanObject(doc)
	if err != nil {
		return err
	}
	var array [8][]byte
	keys := array[:0]
	var seen envelope.KeySet
	for quoted, value, ok := s.Next(); ok; quoted, value, ok = s.Next() {
		key := envelope.MemberName(quoted)
		name := string(key)
		member := memberPath(path, name)
		var dup bool
		keys, dup = seen.Add(keys, key)
		switch {
		case dup:
			return invalidJSON(envelope.ReasonDuplicateKey, member)
		case !slices.Contains(fields, member) || strings.Contains(name, "."):
			return invalidJSON(envelope.ReasonSpelling+documented(fields, path), member)
		}
		if value[0] == '{' && hasMembers(fields, member) {
			if err := checkMembers(value, member, fields); err != nil {
				return err
			}
		}
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

// hasMembers reports whether fields documents members of an object at path.
func hasMembers(fields []string, path string) bool {
	return slices.ContainsFunc(fields, func(f string) bool { return parentPath(f) == path && strings.Contains(f, ".") })
}

// documented lists the member names fields allows in the object at path, in
// their documented order.
func documented(fields []string, path string) string {
	var out []string
	for _, f := range fields {
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
