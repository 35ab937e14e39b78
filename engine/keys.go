package engine

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"strings"
)

// envelopeFields are the exact key spellings of the envelope's objects.
// encoding/json matches keys case-insensitively and keeps the last of
// duplicates; an adapter in another language may read the first, or only
// the exact spelling. So svc refuses anything two readers could disagree on.
var envelopeFields = map[string][]string{
	"":          knownTopLevel,
	"agent":     {"id", "on_behalf_of", "session_id"},
	"action":    {"namespace", "verb", "ability"},
	"target":    {"kind", "ref", "environment"},
	"magnitude": {"count"},
	"axes":      {"reversibility", "blast_radius", "externality"},
	"approval":  {"present", "hold_id"},
	"meta":      {"timestamp", "nonce", "signature"},
}

// scanKeys reads the body once, token by token, and returns its unknown
// top-level keys. It refuses a body that is not exactly one JSON value
// (ErrInvalidJSON), one that is not an object, and, anywhere in the
// document, an object with a duplicate key; in the envelope's own objects
// (not in params or context, which are free-form maps) also two keys equal
// under case folding and a key that spells an envelope field in another
// case ("Target", "ENVIRONMENT"). Malformed JSON is reported before an
// ambiguous key, wherever each occurs.
func scanKeys(body []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, ErrInvalidJSON
	}
	if tok != json.Delim('{') {
		if !json.Valid(body) {
			return nil, ErrInvalidJSON
		}
		return nil, &InvalidEnvelope{Field: "(root)", Reason: "must be a JSON object"}
	}
	s := &scanner{dec: dec}
	if err := s.object(""); err != nil {
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

// scanner walks a document; only a syntax error stops it, so that malformed
// JSON wins over the first ambiguous key it recorded.
type scanner struct {
	dec       *json.Decoder
	ambiguous *InvalidEnvelope
	unknown   []string
}

func (s *scanner) value(path string) error {
	tok, err := s.dec.Token()
	if err != nil {
		return ErrInvalidJSON
	}
	switch tok {
	case json.Delim('{'):
		return s.object(path)
	case json.Delim('['):
		for s.dec.More() {
			if err := s.value(path + "[]"); err != nil {
				return err
			}
		}
		if _, err := s.dec.Token(); err != nil { // ]
			return ErrInvalidJSON
		}
	}
	return nil
}

func (s *scanner) object(path string) error {
	seen := map[string]bool{}
	known, structured := envelopeFields[path]
	for s.dec.More() {
		tok, err := s.dec.Token()
		if err != nil {
			return ErrInvalidJSON
		}
		key, _ := tok.(string)
		s.check(path, key, known, structured, seen)
		if err := s.value(joinPath(path, key)); err != nil {
			return err
		}
	}
	if _, err := s.dec.Token(); err != nil { // }
		return ErrInvalidJSON
	}
	return nil
}

// check records the first ambiguous key and the unknown top-level ones.
func (s *scanner) check(path, key string, known []string, structured bool, seen map[string]bool) {
	id := key
	if structured {
		id = strings.ToLower(Clean(key))
	}
	switch {
	case seen[id]:
		s.fail(joinPath(path, key), "duplicate key (keys must be unique)")
	case structured && misspelled(key, known):
		s.fail(joinPath(path, key), "field names are lower case (snake_case) exactly as documented")
	case path == "" && !slices.Contains(known, key):
		s.unknown = append(s.unknown, key)
	}
	seen[id] = true
}

func (s *scanner) fail(field, reason string) {
	if s.ambiguous == nil {
		s.ambiguous = &InvalidEnvelope{Field: field, Reason: reason}
	}
}

// misspelled reports whether key equals a known field but for case.
func misspelled(key string, known []string) bool {
	for _, k := range known {
		if key != k && strings.EqualFold(key, k) {
			return true
		}
	}
	return false
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
