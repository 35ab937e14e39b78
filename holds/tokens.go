package holds

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/envelope"
)

// maxTokensFileBytes bounds the SVC_RESOLVER_TOKENS file.
const maxTokensFileBytes = 1 << 20

// tokenSet binds resolver credentials, kept only as SHA-256 digests, to
// principals.
type tokenSet []tokenEntry

type tokenEntry struct {
	digest    [sha256.Size]byte
	principal engine.Principal
}

// loadTokens reads SVC_RESOLVER_TOKENS: "" is no tokens, a value starting
// with "{" is inline JSON, anything else is the path of a JSON file. Errors
// never quote the content, which holds secrets.
func loadTokens(src string) (tokenSet, error) {
	src = strings.TrimSpace(src)
	if src == "" {
		return nil, nil
	}
	data := []byte(src)
	if !strings.HasPrefix(src, "{") {
		var err error
		if data, err = readTokensFile(src); err != nil {
			return nil, err
		}
	}
	return parseTokens(data)
}

func readTokensFile(path string) ([]byte, error) {
	data, err := engine.ReadSettingsFile(path, maxTokensFileBytes)
	if err != nil {
		return nil, fmt.Errorf("resolver tokens file: %w", err)
	}
	return data, nil
}

func parseTokens(data []byte) (tokenSet, error) {
	var raw map[string]json.RawMessage
	if err := strictDecode(data, &raw); err != nil {
		return nil, fmt.Errorf("resolver tokens: want a JSON object {token: {type, id}}: %w", err)
	}
	if raw == nil {
		return nil, errors.New("resolver tokens: want a JSON object {token: {type, id}}, got null")
	}
	if err := uniqueTokens(data); err != nil {
		return nil, err
	}
	set := make(tokenSet, 0, len(raw))
	for token, value := range raw {
		var p engine.Principal
		if err := exactPrincipalKeys(value); err != nil {
			return nil, fmt.Errorf("resolver tokens: an entry is not {type, id}: %w", err)
		}
		if err := strictDecode(value, &p); err != nil {
			return nil, fmt.Errorf("resolver tokens: an entry is not {type, id}: %w", err)
		}
		if token == "" {
			return nil, errors.New("resolver tokens: empty token")
		}
		cp, err := canonicalPrincipal(p)
		if err != nil {
			return nil, fmt.Errorf("resolver tokens: entry for %s: %w", p.String(), err)
		}
		set = append(set, tokenEntry{digest: sha256.Sum256([]byte(token)), principal: cp})
	}
	return set, nil
}

// exactPrincipalKeys refuses an entry that is an object whose members are
// not exactly "type" and "id", each once: encoding/json would match "TYPE"
// and keep the last of two "type" members, so one reader could see a human
// and another an agent. An entry that is not an object is left to
// strictDecode, which names what it is.
func exactPrincipalKeys(entry []byte) error {
	keys, err := envelope.MemberNames(entry)
	if err != nil {
		return nil // not an object: strictDecode says what it is
	}
	bad := slices.IndexFunc(keys, func(k string) bool { return k != "type" && k != "id" })
	if bad < 0 {
		var dup bool
		if _, bad, dup = repeatedKey(keys, nil); !dup {
			return nil
		}
	}
	return fmt.Errorf("member %q: members are \"type\" and \"id\", each once, spelled exactly", keys[bad])
}

// uniqueTokens refuses a token listed twice in the JSON object data, which
// a map would silently keep the last of. The error names the entries by
// position, never by token.
func uniqueTokens(data []byte) error {
	keys, err := envelope.MemberNames(data)
	if err != nil {
		return fmt.Errorf("resolver tokens: %w", err)
	}
	if i, j, dup := repeatedKey(keys, nil); dup {
		return fmt.Errorf("resolver tokens: entries %d and %d have the same token; each token must be listed once", i+1, j+1)
	}
	return nil
}

// repeatedKey finds the first key of keys that repeats an earlier one, as
// compared by norm (nil compares them as they are), and returns the
// positions of the two.
func repeatedKey(keys []string, norm func(string) string) (first, again int, found bool) {
	seen := make(map[string]int, len(keys))
	for i, k := range keys {
		if norm != nil {
			k = norm(k)
		}
		if j, dup := seen[k]; dup {
			return j, i, true
		}
		seen[k] = i
	}
	return 0, 0, false
}

// strictDecode decodes exactly one JSON value with no unknown fields. A
// syntax error is reported by offset only, never by the text around it.
func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return fmt.Errorf("invalid JSON at offset %d", se.Offset)
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fmt.Errorf("a JSON %s where a %s belongs", te.Value, te.Type)
		}
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// lookup returns the principal bound to credential, comparing digests in
// constant time against every entry.
func (t tokenSet) lookup(credential string) (engine.Principal, bool) {
	if credential == "" {
		return engine.Principal{}, false
	}
	d := sha256.Sum256([]byte(credential))
	var found engine.Principal
	hit := 0
	for _, e := range t {
		if subtle.ConstantTimeCompare(d[:], e.digest[:]) == 1 {
			found, hit = e.principal, 1
		}
	}
	return found, hit == 1
}
