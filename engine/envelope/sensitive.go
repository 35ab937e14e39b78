package envelope

import "slices"

// ActionWords are the words the policy matches its sensitive-action tables
// against (docs/policy.md, "Sensitive actions"): the words of the verb, the
// ability and the namespace as sent, split as CanonicalVerb splits them (at
// every non-letter-or-digit and at camelCase boundaries), each folded and
// stripped of diacritics, without repeats, in order. So `grantAdminRole`,
// `GRANT_ADMIN_ROLE` and `grant-аdmin-role` (with a Cyrillic а) all give
// grant, admin, role.
func ActionWords(rawVerb, ability, namespace string) []string {
	out := []string{}
	for _, name := range []string{rawVerb, ability, namespace} {
		_, ws := words(nil, name)
		for _, w := range ws {
			if w != "" && !slices.Contains(out, w) {
				out = append(out, w)
			}
		}
	}
	return out
}
