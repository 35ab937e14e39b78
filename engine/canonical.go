package engine

import (
	"strings"
	"unicode"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// Canonical verbs, in ascending order of risk: when several words of a verb
// or ability name disagree, the riskiest wins.
var verbRisk = map[string]int{
	"read": 0, "create": 1, "update": 2, "emit": 3, "execute": 4, "transact": 5, "delete": 6,
}

// verbAliases maps each recognised word to its canonical verb
// (docs/policy.md lists the table).
var verbAliases = buildAliases(map[string][]string{
	"read": {"read", "get", "list", "query", "search", "fetch", "find", "lookup", "look", "view", "show",
		"describe", "inspect", "select", "download", "scan", "count", "browse", "retrieve", "stat", "ls",
		"cat", "watch", "head", "tail", "peek", "check", "status"},
	"create": {"create", "add", "insert", "new", "make", "upload", "register", "generate", "clone", "copy",
		"cp", "mkdir", "touch", "provision", "allocate", "fork", "init"},
	"update": {"update", "edit", "modify", "change", "set", "patch", "put", "write", "rename", "move", "mv",
		"replace", "upsert", "save", "configure", "config", "enable", "disable", "scale", "assign", "merge",
		"tag", "chmod", "chown", "grant", "revoke", "import", "sync", "commit", "approve", "lock", "unlock"},
	"delete": {"delete", "remove", "destroy", "purge", "drop", "truncate", "rm", "rmdir", "erase", "unlink",
		"wipe", "del", "terminate", "shred", "expunge", "evict", "prune", "void", "nuke", "obliterate",
		"deprovision", "decommission", "uninstall", "flush", "clear", "reset", "discard", "trash"},
	"execute": {"execute", "exec", "run", "deploy", "apply", "invoke", "call", "launch", "start", "stop",
		"restart", "reboot", "shutdown", "spawn", "shell", "bash", "sh", "eval", "trigger", "install",
		"migrate", "rollback", "build", "kill", "sudo", "script", "command", "cmd", "release", "rollout"},
	"emit": {"emit", "send", "publish", "notify", "post", "email", "mail", "message", "tweet", "broadcast",
		"share", "forward", "reply", "sms", "push", "dispatch", "announce", "webhook", "page", "alert",
		"invite"},
	"transact": {"transact", "pay", "refund", "transfer", "charge", "purchase", "buy", "sell", "withdraw",
		"deposit", "payout", "bill", "order", "trade", "wire", "checkout", "subscribe", "invoice"},
})

// environmentAliases maps folded environment names to the closed set; any
// other value reads as production.
var environmentAliases = buildAliases(map[string][]string{
	"production": {"production", "prod", "prd", "live"},
	"staging":    {"staging", "stage", "stg"},
	"dev":        {"dev", "development", "develop", "test", "testing"},
})

func buildAliases(table map[string][]string) map[string]string {
	out := map[string]string{}
	for canon, words := range table {
		for _, w := range words {
			out[w] = canon
		}
	}
	return out
}

var folder = cases.Fold()

// confusables maps look-alike letters of other scripts that NFKC keeps to
// the Latin letters they imitate, so "dеlete" with a Cyrillic е is a delete.
var confusables = strings.NewReplacer(
	"а", "a", "в", "b", "е", "e", "ё", "e", "к", "k", "м", "m", "н", "h", "о", "o", "р", "p",
	"с", "c", "т", "t", "у", "y", "х", "x", "і", "i", "ї", "i", "ј", "j", "ѕ", "s", "ԁ", "d",
	"ɡ", "g", "ո", "n", "ս", "u", "α", "a", "ο", "o", "ρ", "p", "τ", "t", "υ", "u", "ν", "v",
	"ι", "i", "κ", "k", "ε", "e", "ı", "i",
)

// Clean applies the text normalisation every caller-supplied string gets:
// Unicode NFKC, control and format characters (zero-width spaces, bidi
// marks) removed, surrounding space trimmed. Case is kept.
func Clean(s string) string {
	if printableASCII(s) {
		return strings.Trim(s, " ")
	}
	return cleanUnicode(s)
}

// cleanUnicode is Clean for any text.
func cleanUnicode(s string) string {
	s = norm.NFKC.String(s)
	s = strings.Map(func(r rune) rune {
		if unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || r == unicode.ReplacementChar {
			return -1
		}
		return r
	}, s)
	return strings.TrimSpace(s)
}

// Fold is Clean followed by Unicode case folding and the confusables map:
// the form in which identities and names are compared.
func Fold(s string) string {
	if printableASCII(s) {
		return strings.ToLower(strings.Trim(s, " "))
	}
	return foldUnicode(s)
}

// foldUnicode is Fold for any text.
func foldUnicode(s string) string {
	return confusables.Replace(folder.String(cleanUnicode(s)))
}

// CanonicalEnvironment maps a caller's environment to production, staging
// or dev. Unrecognised values read as production: the strictest reading.
func CanonicalEnvironment(raw string) string {
	if canon, ok := environmentAliases[Fold(raw)]; ok {
		return canon
	}
	return "production"
}

// CanonicalVerb maps a caller's verb and ability to the closed verb set.
// Words are split on separators and camelCase; the riskiest recognised word
// wins; an ability that names a riskier verb raises the verb; an
// unrecognised verb is delete when irreversible, else update — never read.
func CanonicalVerb(rawVerb, ability, reversibility string) string {
	verb, ok := riskiestVerb(words(rawVerb))
	if !ok {
		verb = "update"
		if reversibility == "irreversible" {
			verb = "delete"
		}
	}
	if fromAbility, ok := riskiestVerb(words(ability)); ok && verbRisk[fromAbility] > verbRisk[verb] {
		verb = fromAbility
	}
	return verb
}

func riskiestVerb(ws []string) (string, bool) {
	best, found := "", false
	for _, w := range ws {
		canon, ok := verbAliases[w]
		if !ok {
			continue
		}
		if !found || verbRisk[canon] > verbRisk[best] {
			best, found = canon, true
		}
	}
	return best, found
}

// words splits a name into folded words at non-letter/digit runs and at
// camelCase boundaries ("bulkDelete", "hard_delete", "db/DROP-table").
func words(s string) []string {
	s = Clean(s)
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			out = append(out, Fold(string(cur)))
			cur = cur[:0]
		}
	}
	runes := []rune(s)
	for i, r := range runes {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			flush()
			continue
		}
		if i > 0 && unicode.IsUpper(r) && len(cur) > 0 && camelBoundary(runes, i) {
			flush()
		}
		cur = append(cur, r)
	}
	flush()
	return out
}

// camelBoundary reports whether an upper-case rune at i starts a new word:
// after a lower-case letter ("bulkDelete") or before one in an acronym run
// ("HTTPDelete" → HTTP, Delete).
func camelBoundary(runes []rune, i int) bool {
	prev := runes[i-1]
	if unicode.IsLower(prev) || unicode.IsDigit(prev) {
		return true
	}
	return unicode.IsUpper(prev) && i+1 < len(runes) && unicode.IsLower(runes[i+1])
}

// printableASCII reports whether s is all printable ASCII (space to tilde),
// which NFKC, the control and format filter and the confusables map all
// keep as is, and which case folding only lowers.
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}
