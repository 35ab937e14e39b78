package engine

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/svc-dev/svc/engine/envelope"
)

// The policy input is written by hand rather than by json.Marshal, whose
// reflection over the envelope's structs and maps cost about 6 % of svc's
// CPU per decision: appendPolicyInput writes the same bytes, which
// TestPolicyInputJSON and FuzzPolicyInputJSON check against json.Marshal's.
// A value of a type the parser does not make (tests build envelopes by
// hand) is written by json.Marshal.

// appendPolicyInput appends the JSON of in, as json.Marshal writes it.
func appendPolicyInput(b []byte, in PolicyInput) ([]byte, error) {
	b = append(b, `{"envelope":`...)
	b, err := appendEnvelope(b, in.Envelope)
	if err != nil {
		return nil, err
	}
	b = append(b, `,"action_words":`...)
	if in.ActionWords == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, w := range in.ActionWords {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, w)
		}
		b = append(b, ']')
	}
	c := in.Cumulative
	b = strconv.AppendInt(append(b, `,"cumulative":{"window_seconds":`...), c.WindowSeconds, 10)
	b = append(appendUsageMembers(append(b, ','), c.Usage), `,"agent":{`...)
	b = append(appendUsageMembers(b, c.Agent), `},"principal":{`...)
	b = append(appendUsageMembers(b, c.Principal), `}},"frozen":`...)
	b = strconv.AppendBool(b, in.Frozen)
	return append(b, '}'), nil
}

// appendEnvelope appends env as json.Marshal writes an *envelope.Envelope.
func appendEnvelope(b []byte, env *envelope.Envelope) ([]byte, error) {
	if env == nil {
		return append(b, "null"...), nil
	}
	b = append(b, '{')
	if env.SvcVersion != "" {
		b = append(appendJSONString(append(b, `"svc_version":`...), env.SvcVersion), ',')
	}
	b = appendJSONString(append(b, `"agent":{"id":`...), env.Agent.ID)
	b = appendJSONString(append(b, `,"on_behalf_of":`...), env.Agent.OnBehalfOf)
	b = appendJSONString(append(b, `,"session_id":`...), env.Agent.SessionID)
	b = appendJSONString(append(b, `},"action":{"namespace":`...), env.Action.Namespace)
	b = appendJSONString(append(b, `,"verb":`...), env.Action.Verb)
	b = appendJSONString(append(b, `,"raw_verb":`...), env.Action.RawVerb)
	b = appendJSONString(append(b, `,"ability":`...), env.Action.Ability)
	b = appendJSONString(append(b, `},"target":{"kind":`...), env.Target.Kind)
	b = appendJSONString(append(b, `,"ref":`...), env.Target.Ref)
	b = appendJSONString(append(b, `,"environment":`...), env.Target.Environment)
	b = appendJSONString(append(b, `,"raw_environment":`...), env.Target.RawEnvironment)
	b, err := appendJSONValue(append(b, `},"params":`...), env.Params)
	if err != nil {
		return nil, err
	}
	if env.Money != nil {
		if b, err = appendMarshalled(append(b, `,"money":`...), env.Money); err != nil {
			return nil, err
		}
	}
	b = strconv.AppendInt(append(b, `,"magnitude":{"count":`...), env.Magnitude.Count, 10)
	b = appendJSONString(append(b, `},"axes":{"reversibility":`...), env.Axes.Reversibility)
	b = appendJSONString(append(b, `,"blast_radius":`...), env.Axes.BlastRadius)
	b = appendJSONString(append(b, `,"externality":`...), env.Axes.Externality)
	b = strconv.AppendBool(append(b, `},"approval":{"present":`...), env.Approval.Present)
	b = appendJSONString(append(b, `,"hold_id":`...), env.Approval.HoldID)
	b = append(b, `},"trajectory_ref":`...)
	if env.TrajectoryRef == nil {
		b = append(b, "null"...)
	} else {
		b = appendJSONString(b, *env.TrajectoryRef)
	}
	if b, err = appendJSONValue(append(b, `,"context":`...), env.Context); err != nil {
		return nil, err
	}
	b = appendJSONString(append(b, `,"meta":{"timestamp":`...), env.Meta.Timestamp)
	b = appendJSONString(append(b, `,"nonce":`...), env.Meta.Nonce)
	b = appendJSONString(append(b, `,"signature":`...), env.Meta.Signature)
	b = appendJSONString(append(b, `},"mode":`...), env.Mode)
	if len(env.Extra) > 0 {
		if b, err = appendMarshalled(append(b, `,"extra":`...), env.Extra); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// appendUsageMembers appends u's members, without braces, as json.Marshal
// writes them inside the object that embeds u.
func appendUsageMembers(b []byte, u Usage) []byte {
	b = strconv.AppendInt(append(b, `"deletes":`...), u.Deletes, 10)
	b = strconv.AppendInt(append(b, `,"external_sends":`...), u.ExternalSends, 10)
	b = strconv.AppendInt(append(b, `,"objects":`...), u.Objects, 10)
	b = append(b, `,"money":{`...)
	for i, currency := range slices.Sorted(maps.Keys(u.Money)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(append(appendJSONString(b, currency), ':'), u.Money[currency], 10)
	}
	return append(b, '}')
}

// appendJSONValue appends v, a value as the envelope parser makes them
// (objects, arrays, strings, json.Number, bool, nil), as json.Marshal
// writes it: object members sorted by name.
func appendJSONValue(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendJSONString(b, v), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case map[string]any:
		if v == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '{')
		var err error
		for i, k := range slices.Sorted(maps.Keys(v)) {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendJSONValue(append(appendJSONString(b, k), ':'), v[k]); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case []any:
		if v == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		var err error
		for i, x := range v {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendJSONValue(b, x); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case json.Number:
		if validJSONNumber(string(v)) {
			return append(b, v...), nil
		}
	}
	// An empty or invalid json.Number (written as 0, or refused), or a type
	// tests made.
	return appendMarshalled(b, v)
}

// validJSONNumber reports whether s is a JSON number (RFC 8259 §6), as
// json.Marshal checks a json.Number.
func validJSONNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && '1' <= s[i] && s[i] <= '9':
		i = skipJSONDigits(s, i+1)
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		if i = skipJSONDigits(s, i+1); s[i-1] == '.' {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		start := i
		if i = skipJSONDigits(s, i); i == start {
			return false
		}
	}
	return i == len(s)
}

// skipJSONDigits is the index of the first byte of s at or after i that is
// not a decimal digit.
func skipJSONDigits(s string, i int) int {
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	return i
}

// appendMarshalled appends json.Marshal's v.
func appendMarshalled(b []byte, v any) ([]byte, error) {
	out, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, out...), nil
}

// hexDigits are the digits of a \u escape.
const hexDigits = "0123456789abcdef"

// appendJSONString appends s quoted as json.Marshal quotes a string: <, >
// and & escaped, as are control characters, U+2028 and U+2029, and each
// byte of invalid UTF-8 written as U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(append(b, s[start:i]...), `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(append(b, s[start:i]...), '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(append(b, s[start:]...), '"')
}
