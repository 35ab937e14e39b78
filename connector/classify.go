package connector

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"sort"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"

	"github.com/svc-dev/svc/connector/internal/strictjson"
	"github.com/svc-dev/svc/engine/envelope"
	"github.com/svc-dev/svc/engine/ijson"
)

// Classification is what a tool call reads as: the envelope fields the
// connector computes before the engine is asked.
type Classification struct {
	Tool   string // canonical tool name
	Verb   string
	Axes   envelope.Axes
	Count  int64
	Kind   string
	Ref    string
	Env    string // an environment named by the arguments, "" when none
	Params map[string]any
	By     string // tool_map:<pattern>, builtin, or cautious:<why>
}

// Blast-radius thresholds of the built-in reading, by magnitude.count.
const (
	scopedFrom   = 2
	broadFrom    = 11
	systemicFrom = 100001
	maxCount     = 1_000_000_000_000
)

// verbAxes are the built-in axes of each canonical verb: reversibility,
// externality, and the least blast radius.
var verbAxes = map[string]struct{ rev, ext, minBlast string }{
	"read":     {"reversible", "internal", "single"},
	"create":   {"reversible", "internal", "single"},
	"update":   {"recoverable", "internal", "single"},
	"delete":   {"irreversible", "internal", "single"},
	"execute":  {"irreversible", "internal", "broad"},
	"emit":     {"irreversible", "outbound", "single"},
	"transact": {"irreversible", "outbound", "single"},
}

// cautious is the reading of a call the connector cannot read: execute,
// irreversible, broad, outbound — held in production by the bundled pack.
var cautious = envelope.Axes{Reversibility: "irreversible", BlastRadius: "broad", Externality: "outbound"}

// cautiously is c read the cautious way, for why: execute, the cautious axes,
// systemic rather than broad when its count says so.
func (c Classification) cautiously(why string) Classification {
	c.Verb, c.Axes, c.By = "execute", cautious, "cautious:"+why
	c.Axes.BlastRadius = maxBlast(cautious.BlastRadius, blastOf(c.Count))
	return c
}

// Argument names the built-in reading looks at (canonical form).
var (
	countArgs   = []string{"count", "limit", "rows", "row_count", "expected_row_count", "num_rows", "quantity", "n", "max_rows", "total"}
	recipients  = []string{"to", "cc", "bcc", "recipients", "recipient", "emails", "phone_numbers"}
	filterArgs  = []string{"where", "filter", "query", "selector", "match", "condition", "pattern", "all"}
	envArgs     = []string{"environment", "env", "target_environment", "stage"}
	refArgs     = []string{"table", "path", "file", "url", "deployment", "resource", "database", "repository", "repo", "bucket", "customer_id", "account_id", "id", "to", "recipient", "name"}
	maxRefBytes = 256
	sizeArgs    = []string{"replicas", "replica_count", "instances", "instance_count", "desired_count", "desired_capacity",
		"capacity", "size", "min_size", "max_size", "nodes", "node_count", "workers", "count"}
)

// Words of a tool's name the built-in reading looks at.
var (
	// containerWords name what holds many objects: deleting one deletes
	// them all (drop_table, destroy_cluster). They count as the last word
	// of the name, its object: db_delete_records deletes records.
	containerWords = []string{"table", "tables", "database", "databases", "db", "dbs", "schema", "schemas", "bucket",
		"buckets", "cluster", "clusters", "disk", "disks", "volume", "volumes", "namespace", "namespaces", "index",
		"indexes", "indices", "collection", "collections", "repository", "repositories", "repo", "repos", "project",
		"projects", "dataset", "datasets", "keyspace", "topic", "topics", "queue", "queues", "partition", "partitions",
		"filesystem", "drive", "drives", "server", "servers", "instance", "instances", "deployment", "deployments",
		"environment", "environments"}
	// wipeWords, anywhere in the name, delete a whole target whatever it
	// is (truncate_rows, wipe_disk).
	wipeWords = []string{"truncate", "wipe", "nuke", "format", "flush"}
	// allWords, in the name of any write, reach every object of a kind
	// (delete_all_sessions, update_all_rows).
	allWords = []string{"all", "everything"}
	// scaleWords change how much of a service runs.
	scaleWords = []string{"scale", "resize"}
	// moneyWords name money moved, whatever the verb (send_money).
	moneyWords = []string{"money", "cash", "funds", "fund", "payment", "payments", "remittance"}
)

// Classify reads a tool call. Exact and glob entries of the tool map come
// first; otherwise the tool's name gives the verb (the engine's canonical
// verb reading) and the argument shape gives the count, target and blast
// radius. A name no verb word explains, or arguments that are not one JSON
// object, read as cautious.
func Classify(tm *ToolMap, name, arguments string) Classification {
	c := Classification{Tool: CanonicalTool(name)}
	params, ok := parseArguments(arguments)
	if !ok {
		c.Params, c.Count = rawArguments(arguments), 1
		return c.cautiously("unparsable_arguments")
	}
	c.Params = params
	c.Env = argEnvironment(params)
	c.Count = argCount(params)
	c.Ref = argRef(params)
	if envelope.HasInvisible(name) {
		// Cleaning would join the words the invisible character parts
		// ("drop\ttable" read as "droptable", no longer a table's drop);
		// a tool name never holds one (OpenAI's are [a-zA-Z0-9_-]).
		return c.cautiously("invisible_characters")
	}
	if e, pattern := tm.Lookup(c.Tool); e != nil {
		c.By = "tool_map:" + pattern
		e.apply(&c, params)
		return c
	}
	verb, known := readVerb(c.Tool)
	if !known {
		return c.cautiously("unknown_tool")
	}
	words := strings.Split(c.Tool, "_")
	if hasWord(words, moneyWords) && slices.Index(envelope.Verbs, verb) < slices.Index(envelope.Verbs, "transact") {
		verb = "transact"
	}
	va := verbAxes[verb]
	c.Verb, c.By = verb, "builtin"
	c.Axes = envelope.Axes{Reversibility: va.rev, Externality: va.ext, BlastRadius: maxBlast(va.minBlast, blastOf(c.Count))}
	switch {
	case verb == "delete" && (slices.Contains(containerWords, words[len(words)-1]) || hasWord(words, wipeWords)):
		c.Axes.BlastRadius = maxBlast(c.Axes.BlastRadius, "broad") // a whole table, cluster, disk
	case verb == "delete" && hasAny(params, filterArgs) && c.Count == 1 && !hasAny(params, countArgs):
		c.Axes.BlastRadius = maxBlast(c.Axes.BlastRadius, "broad") // a filter of unknown extent
	case hasWord(words, scaleWords) && scalesToZero(params):
		// Scaled to nothing, a service is down until someone scales it
		// back: an outage, not a setting.
		c.Axes.Reversibility = "irreversible"
		c.Axes.BlastRadius = maxBlast(c.Axes.BlastRadius, "broad")
	case verb != "read" && hasWord(words, allWords):
		c.Axes.BlastRadius = maxBlast(c.Axes.BlastRadius, "broad") // update_all_rows, revoke_all_tokens
	}
	return c
}

// hasWord reports whether one of words is one of set.
func hasWord(words, set []string) bool {
	return slices.ContainsFunc(words, func(w string) bool { return slices.Contains(set, w) })
}

// scalesToZero reports whether a size argument (replicas, instances,
// desired_count, …) is 0, as a number or a string holding one.
func scalesToZero(params map[string]any) bool {
	for k, v := range params {
		if _, list := v.([]any); !list && slices.Contains(sizeArgs, CanonicalTool(k)) && scalarCount(v) == 0 {
			return true
		}
	}
	return false
}

// readVerb is the engine's canonical verb of a tool name, and whether a
// word of the name explains it.
func readVerb(tool string) (string, bool) { return envelope.VerbOf(tool) }

// CanonicalTool canonicalises a tool name like a verb: Unicode cleaned and
// folded, diacritics and look-alike letters mapped, words split at
// separators and camelCase and joined by "_". "DB-Delete Records",
// "dbDeleteRecords" and "db_delete_records" are one tool.
func CanonicalTool(name string) string {
	var words []string
	var cur []rune
	runes := []rune(envelope.Clean(name))
	flush := func() {
		if len(cur) > 0 {
			words = append(words, stripMarks(envelope.Fold(string(cur))))
			cur = cur[:0]
		}
	}
	for i, r := range runes {
		switch {
		case unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r):
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush()
		case unicode.IsUpper(r) && i > 0 && camel(runes, i):
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
	}
	flush()
	return strings.Join(words, "_")
}

// camel reports whether the upper-case rune at i starts a word: after a
// lower-case letter or digit, or before a lower-case letter in an acronym.
func camel(rs []rune, i int) bool {
	prev := rs[i-1]
	if unicode.IsLower(prev) || unicode.IsDigit(prev) {
		return true
	}
	return unicode.IsUpper(prev) && i+1 < len(rs) && unicode.IsLower(rs[i+1])
}

func stripMarks(w string) string {
	return strings.Map(func(r rune) rune {
		if unicode.In(r, unicode.Mn, unicode.Me) {
			return -1
		}
		return r
	}, norm.NFD.String(w))
}

// parseArguments reads the arguments string as one JSON object whose
// members are each named once, in I-JSON (an escaped lone surrogate would
// read as U+FFFD, one call with another's arguments); numbers are kept
// exactly as sent.
func parseArguments(s string) (map[string]any, bool) {
	raw := bytes.TrimSpace([]byte(s))
	if len(raw) == 0 {
		return map[string]any{}, true
	}
	var m map[string]any
	if ijson.Check(raw) != nil {
		return nil, false
	}
	if err := strictjson.Decode(raw, &m, false); err != nil || m == nil {
		return nil, false
	}
	return m, true
}

// lookupArg is the value of the first argument, in name order, whose
// canonical name is one of names.
func lookupArg(params map[string]any, names []string) (any, bool) {
	return argNamesOf(params).lookup(params, names)
}

// argNames are the names of a call's arguments in name order, each with
// its canonical name, canonicalised once for several lookups.
type argNames []struct{ name, canonical string }

func argNamesOf(params map[string]any) argNames {
	out := make(argNames, 0, len(params))
	for k := range params {
		out = append(out, struct{ name, canonical string }{k, CanonicalTool(k)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// lookup is lookupArg over these names.
func (a argNames) lookup(params map[string]any, names []string) (any, bool) {
	for _, n := range a {
		if slices.Contains(names, n.canonical) {
			return params[n.name], true
		}
	}
	return nil, false
}

func hasAny(params map[string]any, names []string) bool {
	v, ok := lookupArg(params, names)
	return ok && v != nil && v != false && v != ""
}

// argCount is the magnitude of a call: the largest of the counts its
// arguments give (countIn) and its recipients, at least 1.
func argCount(params map[string]any) int64 {
	var recips int64
	for k, v := range params {
		if !slices.Contains(recipients, CanonicalTool(k)) {
			continue
		}
		switch x := v.(type) {
		case []any:
			recips += recipientsIn(x)
		case string:
			recips += int64(len(strings.FieldsFunc(x, isRecipientSep)))
		}
	}
	return min(max(countIn(params, 1), recips), maxCount)
}

// maxCountDepth is how deep in nested objects argCount looks.
const maxCountDepth = 5

// countIn is the count an object of the arguments gives, at least 1: the
// largest of its lists' lengths, its count arguments (scalarCount), the
// items of an ids string ("ids": "1,2,3"), and the counts of the objects
// nested in it ({"options": {"expected_row_count": 1843022}},
// {"selection": {"ids": [...]}}), down to maxCountDepth.
func countIn(obj map[string]any, depth int) int64 {
	n := int64(1)
	for k, v := range obj {
		ck := CanonicalTool(k)
		switch x := v.(type) {
		case []any:
			n = max(n, int64(len(x)))
			continue // a list under a count's name is counted by its length
		case map[string]any:
			if depth < maxCountDepth {
				n = max(n, countIn(x, depth+1))
			}
		case string:
			if ck == "ids" || strings.HasSuffix(ck, "_ids") {
				n = max(n, int64(len(strings.FieldsFunc(x, isListSep))))
			}
		}
		if isCountArg(ck) {
			n = max(n, scalarCount(v))
		}
	}
	return n
}

// isCountArg reports whether a canonical argument name holds a count.
func isCountArg(name string) bool {
	return slices.Contains(countArgs, name) || strings.HasSuffix(name, "_count")
}

// scalarCount reads a count argument that is not a list: a number, or a
// string holding one ("1843022", as a model may quote it); anything else
// (a word, an object, true, null) is unreadable and counts as the maximum.
func scalarCount(v any) int64 {
	switch x := v.(type) {
	case json.Number:
		return numberCount(x)
	case string:
		if num, ok := numericString(x); ok {
			return numberCount(num)
		}
	}
	return maxCount
}

// numericString is s as a JSON number when, spaces aside, it is one.
func numericString(s string) (json.Number, bool) {
	t := strings.TrimSpace(s)
	if t == "" || (t[0] != '-' && (t[0] < '0' || t[0] > '9')) || !json.Valid([]byte(t)) {
		return "", false
	}
	return json.Number(t), true
}

// countOf is the count a count_from argument gives: a list's length, the
// comma-separated items of a string that is not a number, else what
// scalarCount reads (a number, a string holding one; anything else is
// unreadable and counts as the maximum); at least 1.
func countOf(v any) int64 {
	switch x := v.(type) {
	case []any:
		return min(max(int64(len(x)), 1), maxCount)
	case string:
		if _, ok := numericString(x); !ok {
			return max(int64(len(strings.FieldsFunc(x, isListSep))), 1)
		}
	}
	return max(scalarCount(v), 1)
}

func isListSep(r rune) bool { return r == ',' || r == ';' }

// isRecipientSep separates addresses and numbers in one string: a list
// separator or a space, which neither holds.
func isRecipientSep(r rune) bool { return isListSep(r) || unicode.IsSpace(r) }

// recipientsIn counts the recipients of a list: each string element may
// itself hold several (["a@x, b@x"]).
func recipientsIn(list []any) int64 {
	var n int64
	for _, e := range list {
		if s, ok := e.(string); ok {
			n += max(int64(len(strings.FieldsFunc(s, isRecipientSep))), 1)
		} else {
			n++
		}
	}
	return n
}

// numberCount reads a count argument, rounded up; a negative or
// unreadable one counts as the maximum.
func numberCount(x json.Number) int64 {
	f, err := x.Float64()
	if err != nil || f < 0 || math.IsNaN(f) || f > maxCount {
		return maxCount
	}
	return int64(math.Ceil(f))
}

// argEnvironment is the riskiest environment the arguments name, "" when
// none does.
func argEnvironment(params map[string]any) string {
	env := ""
	for k, v := range params {
		if !slices.Contains(envArgs, CanonicalTool(k)) {
			continue
		}
		switch s, ok := v.(string); {
		case ok && strings.TrimSpace(s) != "":
			env = riskierEnv(env, envelope.CanonicalEnvironment(s))
		case !ok && v != nil:
			// ["production"], {"name": "production"}: not an environment
			// the connector can read, so the riskiest.
			env = riskierEnv(env, "production")
		}
	}
	return env
}

// argRef is the target reference an argument names: a scalar, as a string
// of at most maxRefBytes, else its digest.
func argRef(params map[string]any) string {
	names := argNamesOf(params)
	for _, n := range refArgs {
		if v, ok := names.lookup(params, []string{n}); ok {
			return refOf(v)
		}
	}
	return ""
}

func refOf(v any) string {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case json.Number:
		s = x.String()
	case bool:
		s = map[bool]string{true: "true", false: "false"}[x]
	default:
		raw, _ := json.Marshal(x)
		s = string(raw)
	}
	if len(s) > maxRefBytes {
		return "sha256:" + digest(s)
	}
	return s
}

// blastOf is the blast radius of a count.
func blastOf(n int64) string {
	switch {
	case n >= systemicFrom:
		return "systemic"
	case n >= broadFrom:
		return "broad"
	case n >= scopedFrom:
		return "scoped"
	}
	return "single"
}

var blastRank = map[string]int{"single": 0, "scoped": 1, "broad": 2, "systemic": 3}

func maxBlast(a, b string) string {
	if blastRank[b] > blastRank[a] {
		return b
	}
	return a
}

// riskierEnv is the riskier of two canonical environments ("" is none).
func riskierEnv(a, b string) string {
	if a == "" || b != "" && slices.Index(envelope.Environments, b) < slices.Index(envelope.Environments, a) {
		return b
	}
	return a
}
