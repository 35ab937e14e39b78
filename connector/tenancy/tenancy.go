// Package tenancy reads the gateway tenancy map (gateway spec §2.1), which
// binds a gateway caller — a virtual key's hash, its alias or its team — to
// an org, a principal and an environment, and keeps it current: a changed
// file is reloaded, and an invalid one leaves the last good map in force.
package tenancy

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/svc-dev/svc/connector/internal/strictjson"
	"github.com/svc-dev/svc/engine/ijson"
)

// Tenant is one tenant record of the map.
type Tenant struct {
	Name        string            `json:"-"`
	Org         string            `json:"org"`
	Label       string            `json:"label"`
	Principal   string            `json:"principal"`
	Environment string            `json:"environment"`
	Evidence    map[string]string `json:"evidence"`
}

// Bindings maps caller dimensions to tenant names.
type Bindings struct {
	KeyHash  map[string]string `json:"key_hash"`
	KeyAlias map[string]string `json:"key_alias"`
	TeamID   map[string]string `json:"team_id"`
}

// Map is a validated tenancy map.
type Map struct {
	Version int                `json:"version"`
	Tenants map[string]*Tenant `json:"tenants"`
	Binds   Bindings           `json:"bind"`
}

// Caller is what the gateway says about who called it.
type Caller struct {
	KeyHash  string
	KeyAlias string
	TeamID   string
}

// Binding is the tenant a caller is bound to and the dimension that bound it.
type Binding struct {
	Tenant *Tenant
	By     string // key_hash, key_alias or team_id
}

// MaxFile bounds the size of a tenancy map file.
const MaxFile = 4 << 20

// environments are the environment spellings a tenant may declare, by the
// canonical environment they read as (docs/policy.md#canonicalisation).
var environments = map[string]bool{
	"production": true, "prod": true, "prd": true, "live": true,
	"staging": true, "stage": true, "stg": true,
	"dev": true, "development": true, "develop": true, "test": true, "testing": true,
}

var (
	envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	uuidRE    = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
)

// IsKeyHash reports whether s has the shape of LiteLLM's key hash (sha256
// hex). Anything else in the key-hash field — a raw key placed there by a
// custom auth callback — is neither bound nor recorded.
// It is read on every gateway request: a loop, not a regular expression.
func IsKeyHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Bind resolves a caller, most specific dimension first: key_hash, then
// key_alias, then team_id. ok is false for a caller bound by none.
func (m *Map) Bind(c Caller) (Binding, bool) {
	if m == nil {
		return Binding{}, false
	}
	dims := []struct {
		by    string
		value string
		table map[string]string
	}{
		{"key_hash", c.KeyHash, m.Binds.KeyHash},
		{"key_alias", c.KeyAlias, m.Binds.KeyAlias},
		{"team_id", c.TeamID, m.Binds.TeamID},
	}
	for _, d := range dims {
		if d.value == "" || (d.by == "key_hash" && !IsKeyHash(d.value)) {
			continue
		}
		if name, ok := d.table[d.value]; ok {
			return Binding{Tenant: m.Tenants[name], By: d.by}, true
		}
	}
	return Binding{}, false
}

// Orgs is the number of distinct orgs of the map.
func (m *Map) Orgs() int {
	if m == nil {
		return 0
	}
	seen := map[string]bool{}
	for _, t := range m.Tenants {
		seen[t.Org] = true
	}
	return len(seen)
}

// Parse reads and validates a tenancy map. The JSON is read strictly (no
// unknown member, no member twice); every tenant has an org, a principal
// and a known environment; every binding names a tenant; evidence keys
// ending in _env hold environment variable names; and no value anywhere is
// a literal secret, whole or inside a value (a token in a URL, a
// password in its user part), nor is a tenant's name. The text must be
// I-JSON (no invalid UTF-8, which would be read as U+FFFD). Errors name
// the member at fault, never its value.
func Parse(raw []byte) (*Map, error) {
	var m Map
	if err := ijson.Check(raw); err != nil {
		return nil, fmt.Errorf("tenancy map: %w", err)
	}
	if err := strictjson.Decode(raw, &m, true); err != nil {
		return nil, err
	}
	if err := m.validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

func (m *Map) validate() error {
	if m.Version != 1 {
		return fmt.Errorf("version: must be 1, got %d", m.Version)
	}
	if len(m.Tenants) == 0 {
		return errors.New("tenants: must name at least one tenant")
	}
	for i, name := range sortedKeys(m.Tenants) {
		t := m.Tenants[name]
		if HoldsSecret(name) {
			return fmt.Errorf("tenants[%d]: the tenant's name holds what looks like a literal secret; a tenancy map carries no secrets", i)
		}
		if t == nil {
			return fmt.Errorf("tenants.%s: must be an object", name)
		}
		t.Name = name
		if err := t.validate(); err != nil {
			return fmt.Errorf("tenants.%s.%w", name, err)
		}
	}
	for _, b := range []struct {
		dim   string
		table map[string]string
	}{{"key_hash", m.Binds.KeyHash}, {"key_alias", m.Binds.KeyAlias}, {"team_id", m.Binds.TeamID}} {
		if err := m.checkBindings(b.dim, b.table); err != nil {
			return err
		}
	}
	return nil
}

func (t *Tenant) validate() error {
	for _, f := range []struct{ name, value string }{
		{"org", t.Org}, {"principal", t.Principal}, {"environment", t.Environment},
	} {
		if strings.TrimSpace(f.value) == "" {
			return fmt.Errorf("%s: is required and must be a non-empty string", f.name)
		}
		if HoldsSecret(f.value) {
			return fmt.Errorf("%s: holds what looks like a literal secret; a tenancy map carries no secrets", f.name)
		}
	}
	if !orgRE.MatchString(t.Org) {
		return errors.New("org: must be 1 to 64 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit " +
			"(it is part of session ids gateway:<org>:<session> and agent ids gateway:<org>/<model>: with a ':' or '/', " +
			"or another case, two orgs could name one budget)")
	}
	if !environments[strings.ToLower(strings.TrimSpace(t.Environment))] {
		return fmt.Errorf("environment: must be production, staging or dev (or an alias: prod, stage, test, …), got %q", t.Environment)
	}
	if HoldsSecret(t.Label) {
		return errors.New("label: holds what looks like a literal secret; a tenancy map carries no secrets")
	}
	for _, k := range sortedKeys(t.Evidence) {
		v := t.Evidence[k]
		switch {
		case strings.HasSuffix(k, "_env") && !envNameRE.MatchString(v):
			return fmt.Errorf("evidence.%s: must hold the NAME of an environment variable, not a value", k)
		case HoldsSecret(v) || HoldsSecret(k) || (!strings.HasSuffix(k, "_env") && secretName(k)):
			return fmt.Errorf("evidence.%s: a literal secret is refused; name an environment variable in a key ending _env (%s_env)", k, strings.TrimSuffix(k, "_env"))
		}
	}
	return nil
}

func (m *Map) checkBindings(dim string, table map[string]string) error {
	for _, k := range sortedKeys(table) {
		name := table[k]
		field := fmt.Sprintf("bind.%s[%d]", dim, indexOf(sortedKeys(table), k))
		switch {
		case dim == "key_hash" && !IsKeyHash(k):
			return fmt.Errorf("%s: a key_hash must be the sha256 hex of a virtual key (64 lower-case hex digits), never the key itself", field)
		case dim != "key_hash" && HoldsSecret(k):
			return fmt.Errorf("%s: holds what looks like a literal secret; bind on key_hash, key_alias or team_id", field)
		case m.Tenants[name] == nil:
			return fmt.Errorf("%s: names tenant %q, which the map does not define", field, name)
		}
	}
	return nil
}

// orgRE is the spelling of an org: nothing the engine folds together
// (case), and neither ':' nor '/', which separate it in the ids it is part
// of.
var orgRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// secretPrefixes start well-known credential formats: OpenAI and
// Anthropic keys, LiteLLM virtual keys, GitHub, Slack, AWS, Stripe, Google.
var secretPrefixes = []string{"sk-", "sk_", "rk_live", "pk_live", "ghp_", "gho_", "ghs_", "ghu_", "github_pat_",
	"xoxb-", "xoxp-", "xoxa-", "xapp-", "akia", "asia", "aiza", "glpat-", "bearer ", "basic ", "-----begin"}

// SecretShaped reports whether s looks like a credential rather than a name:
// a known token prefix, a JWT, or a long run of letters and digits with
// both and no separators, as random tokens are.
func SecretShaped(s string) bool {
	l := strings.ToLower(strings.TrimSpace(s))
	for _, p := range secretPrefixes {
		if strings.HasPrefix(l, p) && len(l) > len(p)+7 {
			return true
		}
	}
	if strings.HasPrefix(l, "eyj") && strings.Count(l, ".") == 2 {
		return true
	}
	return randomLooking(s)
}

// HoldsSecret reports whether s is a secret (SecretShaped) or carries one:
// a URL with a password in its user part or a credential-named query
// parameter with a value (?token=…, &sig=…), or any secret-shaped word of
// it, words being split at the characters that separate the parts of
// URLs, headers and lists.
func HoldsSecret(s string) bool {
	if SecretShaped(s) {
		return true
	}
	if u, err := url.Parse(strings.TrimSpace(s)); err == nil && u.Scheme != "" {
		if _, ok := u.User.Password(); ok || secretPath(u) {
			return true
		}
		for k, vs := range u.Query() {
			if (secretName(k) || secretParams[strings.ToLower(k)]) && slices.ContainsFunc(vs, func(v string) bool { return v != "" }) {
				return true
			}
		}
	}
	words := strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune("?&#;,@ \t\r\n'\"<>()[]{}|", r) })
	if len(words) > 1 || (len(words) == 1 && words[0] != s) {
		for _, w := range words {
			if SecretShaped(w) || SecretShaped(afterLast(w, "=")) || SecretShaped(afterLast(w, ":")) {
				return true
			}
		}
	}
	return false
}

// webhookPath is a host (and its subdomains) whose URLs carry the
// credential in their path when it holds the word: whoever holds such a
// URL can post to the channel.
type webhookPath struct{ host, word string }

var webhookPaths = []webhookPath{{"hooks.slack.com", "/services/"}, {"hooks.slack.com", "/workflows/"},
	{"hooks.slack.com", "/triggers/"}, {"discord.com", "/webhooks/"}, {"discordapp.com", "/webhooks/"},
	{"office.com", "/webhook"}, {"api.telegram.org", "/bot"}, {"hooks.zapier.com", "/hooks/"}}

// secretPath reports whether u's path carries a credential: a webhook URL
// (its host compared without port or trailing dot, in any case), or a path
// segment that looks random (randomLooking).
func secretPath(u *url.URL) bool {
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	path := strings.ToLower(u.Path)
	if slices.ContainsFunc(webhookPaths, func(w webhookPath) bool {
		return (host == w.host || strings.HasSuffix(host, "."+w.host)) && strings.Contains(path, w.word)
	}) {
		return true
	}
	return slices.ContainsFunc(strings.Split(u.Path, "/"), randomLooking)
}

// secretParams are URL query parameters that carry credentials under names
// secretName does not catch.
var secretParams = map[string]bool{"key": true, "sig": true, "signature": true, "code": true, "access_key": true}

// afterLast is what follows the last sep in s, or s.
func afterLast(s, sep string) string {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[i+len(sep):]
	}
	return s
}

// randomLooking is true of a string of at least 32 characters drawn from
// letters, digits and - _ + / = that mixes letters and digits. A sha256 hex
// digest qualifies too; callers that expect digests test for them first.
func randomLooking(s string) bool {
	if len(s) < 32 || IsKeyHash(s) || uuidRE.MatchString(s) {
		return false
	}
	var letters, digits int
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
			letters++
		case r >= '0' && r <= '9':
			digits++
		case strings.ContainsRune("-_+/=", r):
		default:
			return false
		}
	}
	return letters > 0 && digits > 0
}

// secretName reports whether an evidence member's name says it holds a
// credential (a token, secret, password or key) rather than a setting.
func secretName(k string) bool {
	l := strings.ToLower(k)
	for _, w := range []string{"token", "secret", "password", "passwd", "passphrase", "api_key", "apikey", "credential", "auth",
		"private_key", "privatekey"} {
		if strings.Contains(l, w) {
			return true
		}
	}
	// Short names are matched as whole words only ("pw", not "pwa").
	words := strings.FieldsFunc(l, func(r rune) bool { return (r < 'a' || r > 'z') && (r < '0' || r > '9') })
	return slices.ContainsFunc(words, func(w string) bool { return w == "pw" || w == "pwd" || w == "pass" || w == "pin" })
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
