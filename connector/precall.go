package connector

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
)

// MaxPreCallBody bounds what is read of a guardrail request past
// MaxBodySize to tell whether it is a pre_call request (preCallOnly); its
// values are buffered one at a time, so one such read takes up to a few
// times this much memory.
const MaxPreCallBody = 32 << 20

// preCallOnly reports whether r holds one JSON object whose input_type,
// named once at its top level in any case, is "request": a pre_call
// request. It is read leniently (duplicate members elsewhere, lone
// surrogates, any size up to MaxPreCallBody) because it only tells whether
// the request governs nothing; a body with input_type twice, or spelled
// twice in different cases, is not one.
func preCallOnly(r io.Reader) bool {
	dec := json.NewDecoder(r)
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	named, request := 0, false
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return false
		}
		if key, _ := t.(string); strings.EqualFold(key, "input_type") {
			named++
			request = string(v) == `"`+InputRequest+`"`
		}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return false // something after the object
	}
	return named == 1 && request
}
