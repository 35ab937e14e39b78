package envelope

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// Verbs are the canonical verbs, in ascending order of risk: when several
// words of a verb or ability name disagree, the riskiest wins.
var Verbs = []string{"read", "create", "update", "emit", "execute", "transact", "delete"}

// Environments are the canonical environments, strictest first.
var Environments = []string{"production", "staging", "dev"}

// verbRisk is the rank of each canonical verb in Verbs.
var verbRisk = func() map[string]int {
	out := map[string]int{}
	for i, v := range Verbs {
		out[v] = i
	}
	return out
}()

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
	"delete": append([]string{"delete", "remove", "destroy", "purge", "drop", "truncate", "rm", "rmdir", "erase",
		"unlink", "wipe", "del", "terminate", "shred", "expunge", "evict", "prune", "void", "nuke", "obliterate",
		"deprovision", "decommission", "uninstall", "flush", "clear", "reset", "discard", "trash", "rimraf",
		"rmrf", "deltree", "userdel", "groupdel"}, commandAliases...),
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
// the Latin letters they imitate, so "dеlete" with a Cyrillic е is a delete,
// "ᴅelete" with a Latin small capital D is too, and "human∶alice" with a
// RATIO sign has a type prefix. Keys are case-folded (Fold applies it after
// case folding).
var confusables = strings.NewReplacer(
	"а", "a", "в", "b", "е", "e", "ё", "e", "к", "k", "м", "m", "н", "h", "о", "o", "р", "p",
	"с", "c", "т", "t", "у", "y", "х", "x", "і", "i", "ї", "i", "ј", "j", "ѕ", "s", "ԁ", "d",
	"ɡ", "g", "ո", "n", "ս", "u", "α", "a", "ο", "o", "ρ", "p", "τ", "t", "υ", "u", "ν", "v",
	"ι", "i", "κ", "k", "ε", "e", "ı", "i",
	// Latin small capitals (U+1D00 block, IPA extensions, Latin Extended-D).
	"ᴀ", "a", "ʙ", "b", "ᴄ", "c", "ᴅ", "d", "ᴇ", "e", "ꜰ", "f", "ɢ", "g", "ʜ", "h", "ɪ", "i",
	"ᴊ", "j", "ᴋ", "k", "ʟ", "l", "ᴍ", "m", "ɴ", "n", "ᴏ", "o", "ᴘ", "p", "ꞯ", "q", "ʀ", "r",
	"ꜱ", "s", "ᴛ", "t", "ᴜ", "u", "ᴠ", "v", "ᴡ", "w", "ʏ", "y", "ᴢ", "z",
	// Colon look-alikes that NFKC keeps (it already maps fullwidth and small
	// colons): RATIO, MODIFIER LETTER COLON, MODIFIER LETTER RAISED COLON,
	// ARMENIAN FULL STOP, HEBREW PUNCTUATION SOF PASUQ.
	"∶", ":", "꞉", ":", "˸", ":", "։", ":", "׃", ":",
)

// Clean applies the text normalisation every caller-supplied string gets:
// Unicode NFKC; control and format characters (zero-width spaces, bidi
// marks), other default-ignorable code points (Hangul fillers, the
// combining grapheme joiner, variation selectors) and the Braille blank
// removed; surrounding space trimmed. Case and combining marks are kept:
// Clean is also the form svc records (a target's ref, a reason), where a
// vowel sign of Devanagari or Hebrew is part of the text. Fold, the form in
// which names are compared, drops the marks too.
func Clean(s string) string {
	if printableASCII(s) {
		return strings.Trim(s, " ")
	}
	return cleanUnicode(s)
}

// HasInvisible reports whether s holds a character Clean removes from
// within text: a control or format character or another invisible one. In
// a name made of words ("drop\ttable", "drop\u200btable") removing it
// joins two words into one, so a reader of words should not trust the
// cleaned name.
func HasInvisible(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return dropInvisible(r) < 0 })
}

// maxCleanRounds bounds the NFKC-and-filter rounds of cleanUnicode. A
// removal can leave two characters side by side that NFKC then composes;
// composition never yields a removed character, so the second round is the
// last in practice.
const maxCleanRounds = 4

// cleanUnicode is Clean for any text.
func cleanUnicode(s string) string { return normalise(s, dropInvisible) }

// normalise repeats NFKC and drop until drop removes nothing, so that
// normalising twice changes nothing more, and trims surrounding space.
func normalise(s string, drop func(rune) rune) string {
	for range maxCleanRounds {
		n := norm.NFKC.String(s)
		s = strings.Map(drop, n)
		if len(s) == len(n) {
			break
		}
	}
	return strings.TrimSpace(s)
}

// brailleBlank is U+2800 BRAILLE PATTERN BLANK, a symbol that renders as a
// space but is neither space nor default-ignorable.
const brailleBlank = '\u2800'

// dropInvisible is the strings.Map filter of cleanUnicode: -1 for a
// character that renders as nothing (or as a blank) and would let two
// spellings of one name differ.
func dropInvisible(r rune) rune {
	if r < 0x80 {
		if r < ' ' || r == 0x7f {
			return -1
		}
		return r
	}
	if r == unicode.ReplacementChar || r == brailleBlank ||
		unicode.In(r, unicode.Cc, unicode.Cf,
			unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector) {
		return -1
	}
	return r
}

// dropInvisibleOrMark is dropInvisible that also drops the nonspacing and
// enclosing marks (Mn, Me) left after NFKC, for the compared form (Fold,
// words). NFKC composes what it can first, so "é" is one code point by then
// and stays, while a COMBINING LONG SOLIDUS OVERLAY on an "a" goes.
func dropInvisibleOrMark(r rune) rune {
	if r >= 0x80 && unicode.In(r, unicode.Mn, unicode.Me) {
		return -1
	}
	return dropInvisible(r)
}

// bare is Clean without the nonspacing marks NFKC leaves. It cleans first,
// so that a mark an invisible character kept apart from its letter
// composes with it as it does in Clean: Fold(Clean(s)) == Fold(s).
func bare(s string) string { return normalise(cleanUnicode(s), dropInvisibleOrMark) }

// Fold is Clean, without nonspacing marks, followed by Unicode case
// folding, the same again and the confusables map: the form in which
// identities and names are compared.
func Fold(s string) string {
	if printableASCII(s) {
		return strings.ToLower(strings.Trim(s, " "))
	}
	return foldUnicode(s)
}

// foldUnicode is Fold for any text. Full case folding can itself produce
// combining marks ("İ" → "i" + U+0307, "ǰ" → "j" + U+030C), so the folded
// text is stripped again: Fold(Fold(s)) == Fold(s).
func foldUnicode(s string) string {
	return confusables.Replace(bare(folder.String(bare(s))))
}

// CanonicalEnvironment maps a caller's environment to production, staging
// or dev. Unrecognised values read as production: the strictest reading.
func CanonicalEnvironment(raw string) string {
	if canon, ok := environmentAliases[Fold(raw)]; ok {
		return canon
	}
	return "production"
}

// BoundEnvironment is what an approval of an action in environment raw is
// bound to: its canonical environment when raw is a spelling of one, else
// raw itself, folded. "prod-eu" and "qa" both read as production (the
// strictest reading), yet name different systems, and a human approving
// an action in one has not approved it in the other.
func BoundEnvironment(raw string) string {
	f := Fold(raw)
	if canon, ok := environmentAliases[f]; ok {
		return canon
	}
	return "unrecognised:" + f
}

// CanonicalVerb maps a caller's verb and ability to the closed verb set.
// Words are split on separators and camelCase and compared without
// diacritics; the riskiest recognised word wins; a verb none of whose
// words is an alias takes the verb of its -ing and -ed forms ("sending");
// an ability that names a riskier verb raises the verb; a verb still
// unrecognised is delete when irreversible, else update — never read. Any
// spelling of a delete in the verb or the ability (namesDelete) makes it
// delete. Pass the ability cleaned but not folded: folding would erase its
// camelCase boundaries.
//
// Inflections of the other verbs count in the verb only, and only when
// no word is an alias: in names they are nouns and adjectives as often
// ("billing/get_summary", "list_installed_packages").
func CanonicalVerb(rawVerb, ability, reversibility string) string {
	var verbBuf, abilityBuf [maxNameWords]string // no allocation for the word lists of short names
	verbName, verbWords := words(verbBuf[:], rawVerb)
	abilityName, abilityWords := words(abilityBuf[:], ability)
	verb, ok := riskiestVerb(verbWords, verbAliases)
	if !ok {
		verb, ok = riskiestVerb(verbWords, inflectedAliases)
	}
	if !ok {
		verb = "update"
		if reversibility == "irreversible" {
			verb = "delete"
		}
	}
	if v, ok := riskiestVerb(abilityWords, verbAliases); ok && verbRisk[v] > verbRisk[verb] {
		verb = v
	}
	if verb != "delete" && (namesDelete(verbName, verbWords) || namesDelete(abilityName, abilityWords)) {
		verb = "delete"
	}
	return verb
}

// VerbOf reads one name, a verb or a tool name ("purge_rows",
// "sendEmail", "ＤＥＬＥＴＥ"), as CanonicalVerb reads a verb without an
// ability: the riskiest recognised word, else the verb of an -ing or -ed
// form, and delete for any spelling of a delete. It reports known false,
// with an empty verb, when no word of the name is recognised, leaving the
// reading of an unknown action to the caller (CanonicalVerb's own default,
// update or delete by reversibility, is never read). When known,
// CanonicalVerb(name, "", r) is the same verb for every reversibility r.
func VerbOf(name string) (verb string, known bool) {
	var buf [maxNameWords]string
	cleaned, ws := words(buf[:], name)
	if namesDelete(cleaned, ws) {
		return "delete", true
	}
	if verb, ok := riskiestVerb(ws, verbAliases); ok {
		return verb, true
	}
	return riskiestVerb(ws, inflectedAliases)
}

// riskiestVerb is the riskiest verb that aliases give one of ws.
func riskiestVerb(ws []string, aliases map[string]string) (string, bool) {
	best, found := "", false
	for _, w := range ws {
		canon, ok := aliases[w]
		if ok && (!found || verbRisk[canon] > verbRisk[best]) {
			best, found = canon, true
		}
	}
	return best, found
}

// minInflected is the length, in letters, from which an alias's inflected
// forms are recognised: "shed" is no past tense of sh, nor "rms" a plural
// of rm.
const minInflected = 3

// inflectedAliases maps the -ing and -ed forms of the aliases to the
// riskiest of their verbs ("reading", "updating", "copied"). Plurals are
// left out: outside delete, aliases are nouns as often as verbs ("orders",
// "messages", "views"); so are command names, which are not inflected.
var inflectedAliases = func() map[string]string {
	out := map[string]string{}
	for w, canon := range verbAliases {
		if len(w) < minInflected || slices.Contains(commandAliases, w) {
			continue
		}
		for _, f := range inflections(w, false) {
			if old, ok := out[f]; !ok || verbRisk[canon] > verbRisk[old] {
				out[f] = canon
			}
		}
	}
	return out
}()

// inflections lists the -ing and -ed forms of an alias, with its final e
// dropped, its final consonant doubled or its y turned to i ("deleting",
// "dropped", "copied") and, with plural, its -s and -es forms ("wipes",
// "flushes"). Some are not words ("deleteing"), and match nothing real.
func inflections(alias string, plural bool) []string {
	stem, double := strings.TrimSuffix(alias, "e"), alias+alias[len(alias)-1:]
	out := []string{alias + "ing", stem + "ing", double + "ing", alias + "ed", stem + "ed", double + "ed"}
	if y, ok := strings.CutSuffix(alias, "y"); ok {
		out = append(out, y+"ied")
	}
	if plural {
		out = append(out, alias+"s", alias+"es")
	}
	return out
}

// maxNameWords is the number of words of a verb or ability name that
// CanonicalVerb and namesDelete hold on the stack: more cost an allocation.
const maxNameWords = 8

// words splits a name into folded words without diacritics (undiacritic),
// at runs of characters that are not letters or digits and at camelCase
// boundaries ("bulkDelete", "hard_delete", "db/DROP-table"), after
// dropping the marks that would split "d\u0335elete" (bare) and skipping
// spacing marks inside words. It overwrites buf with them and returns them
// with the name as split: bare, or Clean for printable ASCII, where the
// two agree (TestVerbWordsASCIIFastPath).
func words(buf []string, s string) (string, []string) {
	if printableASCII(s) {
		s = Clean(s)
	} else {
		s = bare(s)
	}
	ws := splitWords(buf[:0], s, isWordRune, camelBoundary)
	for i, w := range ws {
		ws[i] = undiacritic(Fold(w))
	}
	return s, ws
}

// splitWords appends to dst the words of a name as words splits it (s
// already bare), each as spelled, in its case: the runs of inWord
// characters, cut before an upper-case letter where boundary says so, with
// the spacing marks skipped ("de\u0903lete" is delete). The words are cut
// from s, so they cost no allocation unless they hold a spacing mark.
func splitWords(dst []string, s string, inWord func(rune) bool, boundary func(prev, next rune) bool) []string {
	start, prev := -1, rune(0) // start is that of the current word, -1 between words
	for i, r := range s {
		switch {
		case unicode.Is(unicode.Mc, r): // a spacing mark belongs to its word
		case !inWord(r):
			dst, start = appendWord(dst, s, start, i), -1
		case start < 0:
			start = i
		case unicode.IsUpper(r) && boundary(prev, nextRune(s, i)):
			dst, start = appendWord(dst, s, start, i), i
		}
		prev = r
	}
	return appendWord(dst, s, start, len(s))
}

// appendWord appends the word s[start:end] to dst without its spacing
// marks, unless start is -1 (no word).
func appendWord(dst []string, s string, start, end int) []string {
	if start < 0 {
		return dst
	}
	w := s[start:end]
	if !printableASCII(w) {
		w = strings.Map(dropSpacingMark, w)
	}
	return append(dst, w)
}

// dropSpacingMark is the strings.Map filter of appendWord: -1 for a
// spacing mark (Mc).
func dropSpacingMark(r rune) rune {
	if unicode.Is(unicode.Mc, r) {
		return -1
	}
	return r
}

// nextRune is the rune after the one at i in s, or utf8.RuneError at the
// end of s.
func nextRune(s string, i int) rune {
	_, size := utf8.DecodeRuneInString(s[i:])
	next, _ := utf8.DecodeRuneInString(s[i+size:])
	return next
}

// undiacritic drops the diacritics of a folded word, so "délete", "dělete"
// and "ḋelete" are delete: NFKC keeps such letters composed, and Fold keeps
// them (zoë is not zoe), but verb words are compared with Latin aliases
// only. The bare letter may be a confusable ("ӗ" is Cyrillic е + breve).
func undiacritic(w string) string {
	if printableASCII(w) {
		return w
	}
	return undiacriticUnicode(w)
}

// undiacriticUnicode is undiacritic for any text.
func undiacriticUnicode(w string) string {
	return confusables.Replace(strings.Map(func(r rune) rune {
		if unicode.In(r, unicode.Mn, unicode.Me) {
			return -1
		}
		return r
	}, norm.NFD.String(w)))
}

// camelBoundary reports whether an upper-case rune between prev and next
// (utf8.RuneError at the end of the name) starts a new word: after a
// lower-case letter or a digit ("bulkDelete") or before a lower-case letter
// in an acronym run ("HTTPDelete" → HTTP, Delete).
func camelBoundary(prev, next rune) bool {
	if unicode.IsLower(prev) || unicode.IsDigit(prev) {
		return true
	}
	return unicode.IsUpper(prev) && unicode.IsLower(next)
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
