package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/svc-dev/svc/engine/ijson"
)

// This file keeps the encoding/json based ParseEnvelope that the single-pass
// scanner replaced, as the reference the differential fuzz test compares
// against. Only tests use it.

// legacyParseEnvelope is the former ParseEnvelope.
func legacyParseEnvelope(body []byte) (*Envelope, error) {
	if err := ijson.Check(body); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidJSON, err)
	}
	unknown, err := legacyScanKeys(body)
	if err != nil {
		return nil, err
	}
	var w wireEnvelope
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, legacyTypeError(err)
	}
	env, err := w.canonical()
	if err != nil {
		return nil, err
	}
	env.Params, env.Context = legacyObject(w.Params), legacyObject(w.Context)
	if len(unknown) > 0 {
		var top map[string]json.RawMessage
		_ = json.Unmarshal(body, &top)
		env.Extra = make(map[string]json.RawMessage, len(unknown))
		for _, k := range unknown {
			env.Extra[k] = top[k]
		}
	}
	return env, nil
}

// legacyObject decodes params or context the way the former validator did;
// canonical has already refused anything but an object or null.
func legacyObject(raw json.RawMessage) map[string]any {
	out := map[string]any{}
	if len(raw) == 0 || string(raw) == "null" {
		return out
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		return nil
	}
	return out
}

func legacyTypeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		kind := "a number"
		switch te.Type.Kind().String() {
		case "string":
			kind = "a string"
		case "bool":
			kind = "a boolean"
		case "struct", "map":
			kind = "an object"
		}
		return &InvalidEnvelope{Field: te.Field, Reason: "must be " + kind}
	}
	return &InvalidEnvelope{Field: "(root)", Reason: err.Error()}
}

// legacyScanKeys refuses malformed JSON first, as the parser before the
// key checks did: json.Valid also refuses nesting deeper than encoding/json
// allows, which json.Decoder.Token does not check.
func legacyScanKeys(body []byte) ([]string, error) {
	if !json.Valid(body) {
		return nil, ErrInvalidJSON
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, ErrInvalidJSON
	}
	if tok != json.Delim('{') {
		return nil, &InvalidEnvelope{Field: "(root)", Reason: "must be a JSON object"}
	}
	s := &legacyScanner{dec: dec}
	if err := s.object("", 0, false); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, ErrInvalidJSON
	}
	if s.ambiguous != nil {
		return nil, s.ambiguous
	}
	return s.unknown, nil
}

type legacyScanner struct {
	dec       *json.Decoder
	ambiguous *InvalidEnvelope
	unknown   []string
}

// value reads a value at path, depth containers below the root. numbers
// says whether it lies in the params or context object, whose numbers must
// be exact; top, whether it is the value of root member params or context.
func (s *legacyScanner) value(path string, depth int, numbers, top bool) error {
	tok, err := s.dec.Token()
	if err != nil {
		return ErrInvalidJSON
	}
	switch tok {
	case json.Delim('{'):
		return s.object(path, depth, numbers || top)
	case json.Delim('['):
		for s.dec.More() {
			if err := s.value(path+"[]", depth+1, numbers, false); err != nil {
				return err
			}
		}
		if _, err := s.dec.Token(); err != nil {
			return ErrInvalidJSON
		}
	}
	if n, ok := tok.(json.Number); ok && numbers && !legacyExactNumber(string(n)) {
		s.fail(path, inexactNumberReason)
	}
	return nil
}

// legacyExactNumber is exactNumber done the straightforward way: the
// literal and the shortest decimal of its nearest double compared as
// exact rationals. An exponent far beyond double range is decided without
// arithmetic: the literal is then zero, or overflows, or underflows.
func legacyExactNumber(lit string) bool {
	mantissa, exp, _ := strings.Cut(strings.ToLower(lit), "e")
	if strings.Trim(mantissa, "-0.") == "" {
		return true
	}
	if exp != "" {
		e, err := strconv.ParseInt(exp, 10, 64)
		if limit := int64(400 + len(mantissa)); err != nil || e > limit || e < -limit {
			return false
		}
	}
	f, _ := strconv.ParseFloat(lit, 64)
	if math.IsInf(f, 0) {
		return false
	}
	want, ok := new(big.Rat).SetString(lit)
	if !ok {
		panic("big.Rat refused " + lit)
	}
	got, _ := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
	return want.Cmp(got) == 0
}

// object reads an object; only the root (depth 0) and its members named
// after an envelope object (depth 1) are the envelope's own objects. (The
// former code looked objects up by path alone, so a member keyed "" read as
// a second root; the legacy reference has that fixed too.)
func (s *legacyScanner) object(path string, depth int, numbers bool) error {
	seen := map[string]bool{}
	known, structured := legacyFields(path)
	if depth > 1 || (depth == 1 && path == "") {
		known, structured = nil, false
	}
	for s.dec.More() {
		tok, err := s.dec.Token()
		if err != nil {
			return ErrInvalidJSON
		}
		key, _ := tok.(string)
		s.check(path, key, depth, known, structured, seen)
		top := depth == 0 && (key == "params" || key == "context")
		if err := s.value(joinPath(path, key), depth+1, numbers, top); err != nil {
			return err
		}
	}
	if _, err := s.dec.Token(); err != nil {
		return ErrInvalidJSON
	}
	return nil
}

func (s *legacyScanner) check(path, key string, depth int, known []string, structured bool, seen map[string]bool) {
	id := key
	if structured {
		id = strings.ToLower(Clean(key))
	}
	switch {
	case seen[id]:
		s.fail(joinPath(path, key), "duplicate key (keys must be unique)")
	case structured && legacyMisspelled(key, known):
		s.fail(joinPath(path, key), misspeltReason)
	case depth == 0 && !slices.Contains(known, key):
		s.unknown = append(s.unknown, key)
	}
	seen[id] = true
}

func (s *legacyScanner) fail(field, reason string) {
	if s.ambiguous == nil {
		s.ambiguous = &InvalidEnvelope{Field: field, Reason: reason}
	}
}

// legacyFields is the former envelopeFields[path] lookup.
func legacyFields(path string) ([]string, bool) {
	for _, o := range envelopeObjects {
		if o.path == path {
			return o.fields, true
		}
	}
	return nil, false
}

func legacyMisspelled(key string, known []string) bool {
	for _, k := range known {
		if key != k && (strings.ToLower(Clean(key)) == k || strings.EqualFold(key, k)) {
			return true
		}
	}
	return false
}
