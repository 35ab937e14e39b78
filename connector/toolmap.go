package connector

import (
	"errors"
	"fmt"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/svc-dev/svc/connector/internal/strictjson"
	"github.com/svc-dev/svc/engine/envelope"
)

// ToolMap is the operator's tool map (SVC_GATEWAY_TOOL_MAP_FILE): how named
// tools read, before the built-in rules. Exact names win over globs; globs
// are tried in file order.
type ToolMap struct {
	exact map[string]*ToolEntry
	globs []*ToolEntry
}

// ToolEntry is one entry of the tool map. Match is a canonical tool name
// (lower case, words joined by _) or a glob of one (* and ?). Every other
// member is optional and overrides the built-in reading.
type ToolEntry struct {
	Match         string `json:"match"`
	Verb          string `json:"verb"`
	Reversibility string `json:"reversibility"`
	BlastRadius   string `json:"blast_radius"`
	Externality   string `json:"externality"`
	CountFrom     string `json:"count_from"`
	Count         *int64 `json:"count"` // nil: not given (0 is refused)
	TargetFrom    string `json:"target_from"`
	TargetKind    string `json:"target_kind"`
}

type toolMapFile struct {
	Version int          `json:"version"`
	Tools   []*ToolEntry `json:"tools"`
}

var (
	canonicalPattern = regexp.MustCompile(`^[a-z0-9_*?]+$`)
)

// LoadToolMap reads and validates the tool map at path; "" is no map.
func LoadToolMap(path string) (*ToolMap, error) {
	if path == "" {
		return &ToolMap{exact: map[string]*ToolEntry{}}, nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseToolMap(raw)
}

// parseToolMap reads and validates a tool map document.
func parseToolMap(raw []byte) (*ToolMap, error) {
	tm := &ToolMap{exact: map[string]*ToolEntry{}}
	var f toolMapFile
	if err := strictjson.Decode(raw, &f, true); err != nil {
		return nil, err
	}
	if f.Version != 1 {
		return nil, fmt.Errorf("version: must be 1, got %d", f.Version)
	}
	if f.Tools == nil {
		return nil, errors.New("tools: is required and must be an array of entries")
	}
	for i, e := range f.Tools {
		if e == nil {
			return nil, fmt.Errorf("tools[%d]: must be an object", i)
		}
		if err := e.validate(); err != nil {
			return nil, fmt.Errorf("tools[%d].%w", i, err)
		}
		if _, dup := tm.exact[e.Match]; dup || slices.ContainsFunc(tm.globs, func(g *ToolEntry) bool { return g.Match == e.Match }) {
			return nil, fmt.Errorf("tools[%d].match: %q is listed twice", i, e.Match)
		}
		if canonicalPattern.MatchString(e.Match) && !hasWildcard(e.Match) {
			tm.exact[e.Match] = e
		} else {
			tm.globs = append(tm.globs, e)
		}
	}
	return tm, nil
}

func hasWildcard(s string) bool { return strings.ContainsAny(s, "*?") }

func (e *ToolEntry) validate() error {
	if !canonicalPattern.MatchString(e.Match) {
		return fmt.Errorf("match: must be a canonical tool name or glob (lower case letters, digits, _, * and ?), got %q", e.Match)
	}
	if _, err := path.Match(e.Match, ""); err != nil {
		return fmt.Errorf("match: not a valid glob: %v", err)
	}
	if strings.Contains(e.Match, "__") || strings.HasPrefix(e.Match, "_") || strings.HasSuffix(e.Match, "_") {
		return fmt.Errorf("match: %q can never match: a canonical name has no leading, trailing or double _", e.Match)
	}
	for _, f := range []struct {
		name, value string
		allowed     []string
	}{
		{"verb", e.Verb, envelope.Verbs}, {"reversibility", e.Reversibility, envelope.Reversibilities},
		{"blast_radius", e.BlastRadius, envelope.BlastRadii}, {"externality", e.Externality, envelope.Externalities},
	} {
		if f.value != "" && !slices.Contains(f.allowed, f.value) {
			return fmt.Errorf("%s: must be one of %v, got %q", f.name, f.allowed, f.value)
		}
	}
	if e.Count != nil && (*e.Count < 1 || *e.Count > maxCount) {
		return fmt.Errorf("count: must be from 1 to %d", int64(maxCount))
	}
	if e.Count != nil && e.CountFrom != "" {
		return fmt.Errorf("count: give count or count_from, not both")
	}
	return nil
}

// Lookup is the entry for a canonical tool name and the pattern that
// matched, or nil.
func (tm *ToolMap) Lookup(tool string) (*ToolEntry, string) {
	if tm == nil {
		return nil, ""
	}
	if e, ok := tm.exact[tool]; ok {
		return e, e.Match
	}
	for _, e := range tm.globs {
		if ok, _ := path.Match(e.Match, tool); ok {
			return e, e.Match
		}
	}
	return nil, ""
}

// apply sets what the entry says and fills the rest from the built-in
// reading of the name (a verb no word explains reads as execute).
func (e *ToolEntry) apply(c *Classification, params map[string]any) {
	verb, known := readVerb(c.Tool)
	if !known {
		verb = "execute"
	}
	c.Verb = or(e.Verb, verb)
	switch {
	case e.Count != nil:
		c.Count = *e.Count
	case e.CountFrom != "":
		if v, ok := lookupArg(params, []string{e.CountFrom}); ok {
			c.Count = countOf(v)
		}
	}
	if e.TargetFrom != "" {
		if v, ok := lookupArg(params, []string{e.TargetFrom}); ok {
			c.Ref = refOf(v)
		}
	}
	c.Kind = e.TargetKind
	va := verbAxes[c.Verb]
	c.Axes = envelope.Axes{
		Reversibility: or(e.Reversibility, va.rev),
		Externality:   or(e.Externality, va.ext),
		BlastRadius:   or(e.BlastRadius, maxBlast(va.minBlast, blastOf(c.Count))),
	}
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
