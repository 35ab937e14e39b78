package engine

import (
	"bytes"
	"encoding/json"
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

// checkKeys refuses, anywhere in the document, an object with a duplicate
// key; in the envelope's own objects (not in params or context, which are
// free-form maps), also two keys equal under case folding and a key that
// spells an envelope field in another case ("Target", "ENVIRONMENT").
func checkKeys(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	return walkKeys(dec, "")
}

func walkKeys(dec *json.Decoder, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return ErrInvalidJSON
	}
	switch tok {
	case json.Delim('{'):
		return walkObject(dec, path)
	case json.Delim('['):
		for dec.More() {
			if err := walkKeys(dec, path+"[]"); err != nil {
				return err
			}
		}
		_, err = dec.Token() // ]
	}
	if err != nil {
		return ErrInvalidJSON
	}
	return nil
}

func walkObject(dec *json.Decoder, path string) error {
	seen := map[string]bool{}
	known, structured := envelopeFields[path]
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return ErrInvalidJSON
		}
		key, _ := tok.(string)
		field := joinPath(path, key)
		id := key
		if structured {
			id = strings.ToLower(Clean(key))
		}
		if seen[id] {
			return &InvalidEnvelope{Field: field, Reason: "duplicate key (keys must be unique)"}
		}
		seen[id] = true
		if structured && misspelled(key, known) {
			return &InvalidEnvelope{Field: field, Reason: "field names are lower case (snake_case) exactly as documented"}
		}
		if err := walkKeys(dec, field); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // }
		return ErrInvalidJSON
	}
	return nil
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
