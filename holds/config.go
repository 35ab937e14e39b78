package holds

import (
	"errors"
	"fmt"
	"strings"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/envelope"
)

// DefaultTerminalRule is always terminal: a hold under it can never be
// resolved (spec §2.2: irreversible_systemic_prod is a deny, never a hold).
const DefaultTerminalRule = engine.RuleTerminal

// policyDefaultKey is the SVC_RESOLUTION_POLICY key of rules not named.
const policyDefaultKey = "default"

// Config is the resolution configuration of a Service.
type Config struct {
	// ResolverTokens is SVC_RESOLVER_TOKENS: inline JSON
	// {token: {type, id}} or the path of a JSON file of that shape, re-read
	// on every use. "" configures no resolver credentials.
	ResolverTokens string
	// RequireVerified is SVC_REQUIRE_VERIFIED_APPROVER; when false an
	// approver may assert its
	// principal and the record says decided_by_verified: false.
	RequireVerified bool
	// ResolutionPolicy is SVC_RESOLUTION_POLICY: JSON {rule: [types]} with
	// an optional "default" key. "" means every rule is human-only.
	ResolutionPolicy string
	// TerminalRules are rules whose holds can never be resolved, in
	// addition to DefaultTerminalRule.
	TerminalRules []string
}

// DefaultConfig is the configuration of an unconfigured deployment:
// verification required, no resolver tokens, human-only resolution.
func DefaultConfig() Config { return Config{RequireVerified: true} }

// Validate checks what can be checked at start-up: the resolution policy
// parses, the resolver tokens can be read and parse now, and no terminal
// rule is blank.
func (c Config) Validate() error {
	if _, err := parsePolicy(c.ResolutionPolicy); err != nil {
		return fmt.Errorf("invalid SVC_RESOLUTION_POLICY: %w", err)
	}
	if _, err := loadTokens(c.ResolverTokens); err != nil {
		return fmt.Errorf("invalid SVC_RESOLVER_TOKENS: %w", err)
	}
	for _, r := range c.TerminalRules {
		if strings.TrimSpace(r) == "" {
			return errors.New("invalid terminal rules: blank rule id")
		}
	}
	return nil
}

// policy says which principal types may resolve the holds of which rule.
type policy struct {
	rules    map[string][]string
	fallback []string
}

func parsePolicy(src string) (policy, error) {
	p := policy{rules: map[string][]string{}, fallback: []string{TypeHuman}}
	if strings.TrimSpace(src) == "" {
		return p, nil
	}
	var raw map[string][]string
	if err := strictDecode([]byte(src), &raw); err != nil {
		return policy{}, fmt.Errorf("want a JSON object {rule: [principal types]}: %w", err)
	}
	if raw == nil {
		return policy{}, errors.New("want a JSON object {rule: [principal types]}, got null")
	}
	if err := uniqueRules(src); err != nil {
		return policy{}, err
	}
	for rule, types := range raw {
		rule = strings.TrimSpace(rule)
		if rule == "" {
			return policy{}, errors.New("blank rule id")
		}
		canon := make([]string, 0, len(types))
		for _, t := range types {
			ct, ok := principalType(t)
			if !ok {
				return policy{}, fmt.Errorf("rule %s: unknown principal type %q (want human, agent, automation)", rule, t)
			}
			canon = append(canon, ct)
		}
		if rule == policyDefaultKey {
			p.fallback = canon
		} else {
			p.rules[rule] = canon
		}
	}
	return p, nil
}

// uniqueRules refuses a rule listed twice in the policy src, also when the
// two keys differ only by surrounding space: a map would keep either one,
// depending on its iteration order.
func uniqueRules(src string) error {
	keys, err := envelope.MemberNames([]byte(src))
	if err != nil {
		return fmt.Errorf("want a JSON object {rule: [principal types]}: %w", err)
	}
	if _, i, dup := repeatedKey(keys, strings.TrimSpace); dup {
		return fmt.Errorf("rule %q is listed more than once (keys are compared after trimming spaces); list each rule once",
			strings.TrimSpace(keys[i]))
	}
	return nil
}

// allowed returns the principal types that may resolve holds of rule.
func (p policy) allowed(rule string) []string {
	if types, ok := p.rules[rule]; ok {
		return types
	}
	return p.fallback
}
