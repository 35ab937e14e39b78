package envelope

import (
	"bytes"
	"slices"
	"strings"
)

// Reasons of refused member names, worded alike on /v1/decide (keyScanner)
// and by the engine's strict decoding of its other request bodies
// (docs/api.md "No ambiguous keys").
const (
	ReasonDuplicateKey = "duplicate key (keys must be unique)"
	ReasonSpelling     = "field names are spelled exactly as documented: "
)

// envelopeObjects are the envelope's own objects, by path, with the exact
// spellings of their keys. encoding/json matches keys case-insensitively
// and keeps the last of duplicates; an adapter in another language may read
// the first, or only the exact spelling. So svc refuses anything two
// readers could disagree on.
var envelopeObjects = []envelopeObject{
	{"", knownTopLevel},
	{"agent", []string{"id", "on_behalf_of", "session_id"}},
	{"action", []string{"namespace", "verb", "ability"}},
	{"target", []string{"kind", "ref", "environment"}},
	{"magnitude", []string{"count"}},
	{"axes", []string{"reversibility", "blast_radius", "externality"}},
	{"approval", []string{"present", "hold_id"}},
	{"meta", []string{"timestamp", "nonce", "signature"}},
}

// envelopeObject is one of the envelope's own objects.
type envelopeObject struct {
	path   string
	fields []string
}

// maxNestingDepth is encoding/json's limit on nested arrays and objects.
const maxNestingDepth = 10000

// maxLinearKeys is how many keys an object's duplicate check compares one
// by one before it switches to a map.
const maxLinearKeys = 16

// member is one key and raw value of the document's root object.
type member struct {
	key   []byte // decoded key
	value []byte // the value exactly as sent
}

// scanned is what scanKeys learnt of a well-formed, unambiguous document.
type scanned struct {
	members []member // the root object's members, in document order
}

// scanKeys reads the body once, byte by byte, and returns its root members.
// It refuses a body that is not exactly one JSON value (ErrInvalidJSON),
// one that is not an object, and, anywhere in the document, an object with
// a duplicate key; in the envelope's own objects (not in params or context,
// which are free-form maps) also two keys equal under case folding and a
// key that spells an envelope field in another case ("Target",
// "ENVIRONMENT"); and, in params and context (when an object), a number
// that JCS would write as another number (exactNumber). The first such
// key or number in document order is reported. Malformed JSON, nesting
// deeper than encoding/json allows included, is reported before an
// ambiguous key or number, wherever each occurs.
func scanKeys(body []byte) (scanned, error) {
	s := keyScanner{data: body, stack: make([]frame, 0, 8), seen: make([][]byte, 0, 32)}
	s.out.members = make([]member, 0, len(knownTopLevel))
	s.skipSpace()
	s.object = s.pos < len(body) && body[s.pos] == '{'
	if err := s.document(); err != nil {
		return scanned{}, ErrInvalidJSON
	}
	switch {
	case !s.object:
		return scanned{}, &InvalidEnvelope{Field: "(root)", Reason: "must be a JSON object"}
	case s.ambiguous != nil:
		return scanned{}, s.ambiguous
	}
	return s.out, nil
}

// keyScanner walks a document without recursion, so no nesting exhausts
// the goroutine stack. Only a syntax error, nesting too deep included,
// stops it, so that malformed JSON wins over the first ambiguous key it
// recorded.
type keyScanner struct {
	data      []byte
	pos       int
	object    bool     // the root is an object: check keys and record members
	start     int      // offset of the value of the root member being read
	stack     []frame  // the open arrays and objects, the root first
	seen      [][]byte // compared forms of the open objects' keys, each object's after its parent's
	decoded   [][]byte // keys and compared forms that are not bytes of the body
	ambiguous *InvalidEnvelope
	out       scanned
}

// text is a key or compared form the scanner keeps: data[start:end], or,
// when dec > 0, decoded[dec-1].
type text struct{ start, end, dec int }

// bytesOf returns the bytes t stands for.
func (s *keyScanner) bytesOf(t text) []byte {
	if t.dec > 0 {
		return s.decoded[t.dec-1]
	}
	return s.data[t.start:t.end]
}

// keep stores a decoded or compared form and returns it as a text.
func (s *keyScanner) keep(b []byte) text {
	s.decoded = append(s.decoded, b)
	return text{dec: len(s.decoded)}
}

// frame is one open array or object. While a container is open, its key
// is its parent's member.
type frame struct {
	array   bool
	started bool   // has a member or element
	numbers bool   // the object is params or context, whose numbers must be exact
	object  int    // 1 + its index in envelopeObjects for an envelope object, else 0
	member  text   // the key being read
	keys    KeySet // the object's keys (compared forms), in keyScanner.seen
}

// document reads one value and then only white space to the end.
func (s *keyScanner) document() error {
	if err := s.value(); err != nil {
		return err
	}
	for len(s.stack) > 0 {
		more, err := s.next()
		if err != nil {
			return err
		}
		if more {
			if err := s.value(); err != nil {
				return err
			}
		}
	}
	s.skipSpace()
	if s.pos != len(s.data) {
		return errSyntax
	}
	return nil
}

// value reads a scalar, or opens an array or object.
func (s *keyScanner) value() error {
	s.skipSpace()
	if s.pos >= len(s.data) {
		return errSyntax
	}
	switch c := s.data[s.pos]; c {
	case '{', '[':
		return s.open(c)
	case '"':
		_, _, err := s.str()
		return err
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	}
	return s.number()
}

// next moves past the value just read: it closes the innermost container,
// or reads the separator (and, in an object, the key) before the next value.
func (s *keyScanner) next() (bool, error) {
	top := &s.stack[len(s.stack)-1]
	if top.started && s.object && len(s.stack) == 1 {
		s.out.members = append(s.out.members, member{key: s.bytesOf(top.member), value: s.data[s.start:s.pos]})
	}
	s.skipSpace()
	if s.pos >= len(s.data) {
		return false, errSyntax
	}
	c := s.data[s.pos]
	if (top.array && c == ']') || (!top.array && c == '}') {
		s.pos++
		s.close()
		return false, nil
	}
	if top.started {
		if c != ',' {
			return false, errSyntax
		}
		s.pos++
	}
	top.started = true
	if top.array {
		return true, nil
	}
	return true, s.key(top)
}

// open pushes a new array or object, or fails, as encoding/json's scanner
// does, when that nests deeper than maxNestingDepth. The envelope's own
// objects are the root and the root's members named after one of them; any
// other object, a member keyed "" included, is free-form.
func (s *keyScanner) open(c byte) error {
	if len(s.stack) == maxNestingDepth {
		return errSyntax
	}
	s.pos++
	f := frame{array: c == '[', keys: KeySet{start: len(s.seen)}}
	switch n := len(s.stack); {
	case f.array:
	case n == 0:
		f.object = 1
	case n == 1 && !s.stack[0].array:
		key := string(s.bytesOf(s.stack[0].member))
		if i := slices.IndexFunc(envelopeObjects[1:], func(o envelopeObject) bool { return o.path == key }); i >= 0 {
			f.object = 2 + i
		}
		f.numbers = key == "params" || key == "context"
	}
	s.stack = append(s.stack, f)
	return nil
}

// close pops the innermost container and forgets its keys.
func (s *keyScanner) close() {
	n := len(s.stack) - 1
	s.seen = s.seen[:s.stack[n].keys.start]
	s.stack = s.stack[:n]
}

// key reads a member's key and colon and checks the key.
func (s *keyScanner) key(f *frame) error {
	s.skipSpace()
	if s.pos >= len(s.data) || s.data[s.pos] != '"' {
		return errSyntax
	}
	start := s.pos + 1
	raw, plain, err := s.str()
	if err != nil {
		return err
	}
	s.skipSpace()
	if s.pos >= len(s.data) || s.data[s.pos] != ':' {
		return errSyntax
	}
	s.pos++
	s.skipSpace()
	f.member = text{start: start, end: start + len(raw)}
	if len(s.stack) == 1 {
		s.start = s.pos
	}
	if !plain {
		f.member = s.keep(unquote(raw))
	}
	if s.object && s.ambiguous == nil {
		s.check(f)
	}
	return nil
}

// check records the first ambiguous key.
func (s *keyScanner) check(f *frame) {
	key, id, misspelt := s.bytesOf(f.member), f.member, false
	var fields []string
	if f.object > 0 {
		fields = envelopeObjects[f.object-1].fields
		if !lowerASCII(key) {
			canon := strings.ToLower(Clean(string(key)))
			id = s.keep([]byte(canon))
			_, misspelt = misspelling(string(key), canon, fields)
		}
	}
	var dup bool
	s.seen, dup = f.keys.Add(s.seen, s.bytesOf(id))
	switch {
	case dup:
		s.fail(key, ReasonDuplicateKey)
	case misspelt:
		s.fail(key, misspeltReason)
	}
}

// lowerASCII reports whether key is printable ASCII without an upper-case
// letter or surrounding space: then Clean, Fold and ToLower keep it as it
// is, and it cannot spell a (lower-case) field name another way.
func lowerASCII(key []byte) bool {
	if len(key) > 0 && (key[0] == ' ' || key[len(key)-1] == ' ') {
		return false
	}
	for _, c := range key {
		if c < ' ' || c > '~' || ('A' <= c && c <= 'Z') {
			return false
		}
	}
	return true
}

// KeySet is the set of one object's keys, for its duplicate check. The
// keys are kept in a slice of its owner, from start on: nested objects
// share one slice, each object's keys after those of the object it is in,
// so that the slice is a stack of the open objects' keys. They are compared
// one by one while there are at most maxLinearKeys of them, with no
// allocation beyond the slice's growth; past that they are also put in a
// map, so that an object of n keys costs O(n), not O(n²).
type KeySet struct {
	start int                 // the object's first key in its owner's slice
	index map[string]struct{} // all its keys once it has more than maxLinearKeys, else nil
}

// Add adds key to the set, whose keys are keys[k.start:], and returns keys
// with key appended when it is kept there, and whether it was in the set
// already. Like append, add may reuse the array of keys. key must not change
// while the set is in use.
func (k *KeySet) Add(keys [][]byte, key []byte) ([][]byte, bool) {
	if k.index != nil {
		if _, dup := k.index[string(key)]; dup {
			return keys, true
		}
		k.index[string(key)] = struct{}{}
		return keys, false
	}
	for _, seen := range keys[k.start:] {
		if bytes.Equal(seen, key) {
			return keys, true
		}
	}
	keys = append(keys, key)
	if len(keys)-k.start > maxLinearKeys {
		k.index = make(map[string]struct{}, 4*maxLinearKeys)
		for _, seen := range keys[k.start:] {
			k.index[string(seen)] = struct{}{}
		}
	}
	return keys, false
}

// fail records the first ambiguous key, named by its path.
func (s *keyScanner) fail(key []byte, reason string) {
	s.ambiguous = &InvalidEnvelope{Field: joinPath(s.path(len(s.stack)-1), string(key)), Reason: reason}
}

// path is the path of the value being read in the n outermost open
// containers: a member's key, or "[]" for an array element, joined.
func (s *keyScanner) path(n int) string {
	path := ""
	for _, f := range s.stack[:n] {
		if f.array {
			path += "[]"
		} else {
			path = joinPath(path, string(s.bytesOf(f.member)))
		}
	}
	return path
}

// checkNumber records, as the first ambiguity, a number of params or
// context that is not exactly the number JCS writes for it (exactNumber).
// number calls it for every such number but a short integer, which is.
func (s *keyScanner) checkNumber(lit []byte) {
	if s.ambiguous == nil && !exactNumber(lit) {
		s.ambiguous = &InvalidEnvelope{Field: s.path(len(s.stack)), Reason: inexactNumberReason}
	}
}

// misspeltReason is the refusal of a key that spells a field another way.
const misspeltReason = ReasonSpelling + "lower case (snake_case), no surrounding space, no full-width or other compatibility forms, no invisible characters"

// misspelling returns the known name that key, not itself one of known,
// reads as: one it equals but for case (as encoding/json matches names), or
// its compared form canon (lower case, surrounding space, invisible
// characters and compatibility forms such as full-width letters removed).
// Two readers could disagree on such a key, so it is refused rather than
// ignored.
func misspelling(key, canon string, known []string) (string, bool) {
	for _, k := range known {
		if key != k && (canon == k || strings.EqualFold(key, k)) {
			return k, true
		}
	}
	return "", false
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
