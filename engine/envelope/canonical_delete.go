package envelope

// The spellings of a delete that canonicalisation sees through beyond the
// alias table: inflections and nouns, words run together or split apart,
// and digits or symbols standing for letters. They only ever make a verb
// delete, the strictest class, so a false positive charges a budget and
// never loosens anything.

import (
	"slices"
	"strings"
	"unicode"
)

// namesDelete reports whether a verb or ability name, as words splits
// it, spells a delete, either in its folded words ws or in their
// skeletons, where digits and symbols that stand for letters read as those
// letters; in a name that reads (readsOnly), nouns of deletion do not
// count. A name whose stand-ins may split it into other words (resplits)
// is also read split around them (inSkeletonWords).
func namesDelete(name string, ws []string) bool {
	d := deletes
	if readsOnly(ws) {
		d = deletesInReads
	}
	var buf [maxNameWords]string
	if d.plain.in(ws, nil) || d.skeletal.in(skeletons(buf[:0], ws), nil) {
		return true
	}
	return resplits(name) && d.skeletal.inSkeletonWords(name)
}

// resplits reports whether inSkeletonWords may split a name into other
// words than words does: only where it has a symbol stand-in, which words
// splits at, or a stand-in before an upper-case letter, where
// camelBoundary starts a word and skeletonBoundary does not. Split into
// the same words, a name cannot match in inSkeletonWords where the
// skeletons of its words did not: mixedCase only narrows the matches
// (TestNamesDeleteResplits).
func resplits(name string) bool {
	prev := rune(0)
	for _, r := range name {
		if strings.ContainsRune(skeletonSymbols, r) || isStandIn(prev) && unicode.IsUpper(r) {
			return true
		}
		prev = r
	}
	return false
}

// inSkeletonWords reports whether a name (bare) spells a delete split
// again with its stand-ins inside words (skeletonBoundary): as words
// splits it, symbols separate words, and an upper-case letter after a
// digit starts one ("DR0PTABLE" → DR0, PTABLE). A word so split that mixes
// cases is matched at its start only (mixedCase).
func (d *deleteSpelling) inSkeletonWords(name string) bool {
	var wordBuf, skeletonBuf [maxNameWords]string
	var atStartBuf [maxNameWords]bool
	split, atStart := splitWords(wordBuf[:0], name, isSkeletonRune, skeletonBoundary), atStartBuf[:0]
	for i, w := range split {
		atStart = append(atStart, mixedCase(w))
		split[i] = undiacritic(Fold(w))
	}
	return d.in(skeletons(skeletonBuf[:0], split), atStart)
}

// readsOnly reports whether a name says it reads: it has a read alias and
// none riskier than update, which beside a read is a noun as often
// ("get_tls_termination_config"). Its nouns of deletion name what is
// read, a feature or a setting as often as an act. Beside update alone
// they count: a name that changes a deletion may carry it out
// ("approve_deletion", "commit_removal", "sync_deletions").
func readsOnly(ws []string) bool {
	reads, risk := false, 0
	for _, w := range ws {
		if canon, ok := verbAliases[w]; ok {
			reads = reads || canon == "read"
			risk = max(risk, verbRisk[canon])
		}
	}
	return reads && risk <= verbRisk["update"]
}

// mixedCase reports whether a word has upper- and lower-case letters. Its
// case then marks where the words run together in it start, and a capital
// after a digit starts one ("getLayer4Settings" holds no erase, nor
// "getTier3Settings" a reset): only a match at its start counts, which is
// where a stand-in in its first word puts one ("De1User"). A word in one
// case says nothing by its case and reads as its lower-case spelling does
// ("BULKD3LETE" as "bulkd3lete").
func mixedCase(w string) bool {
	return strings.ContainsFunc(w, unicode.IsUpper) && strings.ContainsFunc(w, unicode.IsLower)
}

// skeletons appends the skeletons of ws to dst. Those that differ from
// their word are cut from one string, so that a name costs at most one
// allocation: a Builder only appends, so what it has built stays as cut.
func skeletons(dst, ws []string) []string {
	var b strings.Builder
	for i, w := range ws {
		if !strings.ContainsFunc(w, standsForLetter) {
			dst = append(dst, w)
			continue
		}
		if b.Cap() == 0 {
			b.Grow(totalLen(ws[i:])) // a skeleton is never longer than its word
		}
		start := b.Len()
		for _, r := range w {
			b.WriteRune(skeletonRune(r))
		}
		dst = append(dst, b.String()[start:])
	}
	return dst
}

// totalLen is the sum of the lengths of ws.
func totalLen(ws []string) int {
	n := 0
	for _, w := range ws {
		n += len(w)
	}
	return n
}

// skeletonBoundary is camelBoundary where a digit or symbol stands for a
// letter of the word it is in, and so ends no word: "DR0PTABLE" and
// "De1User" are one word, as "dr0ptable" and "de1user" are (but see
// mixedCase).
func skeletonBoundary(prev, next rune) bool {
	return !isStandIn(prev) && camelBoundary(prev, next)
}

// minContainedAlias is the length, in letters, from which a delete alias
// (or its -ing form, or a noun of it) is looked for inside a longer word.
// Inside words the shorter aliases are mostly noise ("format",
// "delivery"): those of leadingAlias letters are looked for at the start of
// a word, and rm and del there only before a leadTails word.
const minContainedAlias = 5

// leadingAlias is the length of the delete aliases (drop, nuke, void, wipe,
// rmrf) that are found at the start of a run-together word ("droptable",
// "wipedisk"), but not elsewhere in it ("backdrop", "avoid", "swipe").
const leadingAlias = 4

// compounds are words that start with a leadingAlias delete alias and
// name no deletion (their plurals and longer words starting with them
// neither).
var compounds = []string{"dropbox", "dropcap", "dropdown", "droplet", "dropoff", "dropout", "dropship", "dropzone"}

// leadObjects are what a delete acts on: run together after rm or del, they
// make it a delete ("rmtree", "deluser", "DELALL"), as do their plurals,
// the verb aliases and theirs, and leadFlags (leadTails).
var leadObjects = []string{
	"account", "all", "attr", "backup", "branch", "bucket", "cache", "col", "column", "container", "data", "db",
	"dir", "disk", "doc", "entry", "field", "file", "folder", "group", "image", "index", "instance", "item",
	"job", "key", "log", "msg", "node", "obj", "object", "path", "pod", "policy", "project", "record", "repo",
	"role", "row", "secret", "snapshot", "table", "tag", "tree", "user", "vm", "volume",
}

// commandAliases are the delete aliases that are command names: Redis's
// hdel, xdel, getdel, srem, zrem, lrem and zremrange*, Python's delattr,
// FTP's dele and rmd. They count as words and as pieces that join into
// one ("ZRem", "__delattr__"), but have no inflections or skeletons, lead
// no word and are not looked for inside one: "1rem" and "irem" are no
// lrem, "xdelta" no xdel, "de1e" no dele.
var commandAliases = []string{
	"hdel", "xdel", "getdel", "srem", "zrem", "lrem", "zremrangebyscore", "zremrangebyrank", "zremrangebylex",
	"delattr", "dele", "rmd",
}

// leadFlags are the options of rm that its run-together spellings carry
// ("hdfs_rmr", "rmrf").
var leadFlags = []string{"r", "rf"}

// irregularNouns are the nouns of delete aliases that are not the -ion
// form of an alias ending in te or ct (nouns derives those).
var irregularNouns = map[string][]string{
	"remove": {"removal"}, "erase": {"erasure"}, "destroy": {"destruction"}, "expunge": {"expungement"},
}

// wordNouns are the nouns of deletion that count as words only, not
// inside longer ones: they name a feature as often as an act ("TLS
// termination", "context truncation"), and "determination" holds one.
var wordNouns = []string{"termination", "truncation"}

// deleteSpelling recognises the delete aliases in the words of a name as
// spelled in one form: folded, or skeletons of folded words. Only delete's
// are sought inside words, joined pieces and skeletons: the other verbs'
// aliases are nouns as often as verbs, and found this way would turn reads
// into writes ("list_orders", "get_messages"), while a false delete only
// makes the verb the strictest.
type deleteSpelling struct {
	forms     map[string]bool     // the aliases, their inflections and nouns
	prefixes  map[string]bool     // the prefixes of forms: pieces worth joining
	contained map[string][]string // by their first minContainedAlias bytes
	leading   []string
	compounds []string
	short     []string        // rm and del, which lead a word before a tail
	tails     map[string]bool // leadTails
}

// deleteSpellings are the spellings of a delete in folded words (plain)
// and in their skeletons (skeletal): deletes all of them, deletesInReads
// all but the nouns of deletion, for names that read (readsOnly).
type deleteSpellings struct{ plain, skeletal *deleteSpelling }

var (
	deletes        = deleteSpellings{newDeleteSpelling(false, true), newDeleteSpelling(true, true)}
	deletesInReads = deleteSpellings{newDeleteSpelling(false, false), newDeleteSpelling(true, false)}
)

// newDeleteSpelling builds the spellings in folded words or, when
// skeletal, in their skeletons, where aliases shorter than leadingAlias
// only lead words before a leadTails word ("de1user": "de1" and "dei" are
// no del) and commandAliases match nothing. withNouns adds the nouns of
// deletion.
func newDeleteSpelling(skeletal, withNouns bool) *deleteSpelling {
	key := func(s string) string { return s }
	if skeletal {
		key = skeleton
	}
	d := &deleteSpelling{forms: map[string]bool{}, prefixes: map[string]bool{}, contained: map[string][]string{},
		tails: map[string]bool{}}
	for w, canon := range verbAliases {
		switch {
		case canon != "delete":
			continue
		case slices.Contains(commandAliases, w):
			if !skeletal {
				d.addForm(w) // and no other spelling
			}
		case len(w) < leadingAlias:
			d.short = append(d.short, key(w)) // in skeletons too: "de1user" leads with del
			if !skeletal {
				d.addAlias(w, key, withNouns)
			}
		default:
			d.addAlias(w, key, withNouns)
		}
	}
	for _, c := range compounds {
		d.compounds = append(d.compounds, key(c))
	}
	for _, t := range leadTails() {
		d.tails[key(t)] = true
	}
	return d
}

// addAlias adds the spellings of one delete alias w, taken by key, with
// its nouns when withNouns.
func (d *deleteSpelling) addAlias(w string, key func(string) string, withNouns bool) {
	d.addForm(key(w))
	if len(w) >= minInflected {
		for _, f := range inflections(w, true) {
			d.addForm(key(f))
		}
	}
	if withNouns {
		d.addNouns(w, key)
	}
	switch {
	case len(w) == leadingAlias:
		d.leading = append(d.leading, key(w))
	case len(w) >= minContainedAlias && !endsInShortAlias(w):
		d.addContained(key(w))
		if stem, ok := strings.CutSuffix(w, "e"); ok {
			d.addContained(key(stem + "ing")) // "deleting" contains no "delete"
		}
	}
}

// addNouns adds the nouns of deletion of alias w and their plurals,
// looked for inside words too unless wordNouns.
func (d *deleteSpelling) addNouns(w string, key func(string) string) {
	for _, n := range nouns(w) {
		d.addForm(key(n))
		d.addForm(key(n + "s"))
		if len(n) >= minContainedAlias && !slices.Contains(wordNouns, n) {
			d.addContained(key(n))
		}
	}
}

// nouns lists the nouns of deletion of an alias: the -ion form of one
// ending in te or ct ("deletion", "truncation", "eviction"), else its
// irregularNouns.
func nouns(alias string) []string {
	if stem, ok := strings.CutSuffix(alias, "te"); ok {
		return []string{stem + "tion"}
	}
	if strings.HasSuffix(alias, "ct") {
		return []string{alias + "ion"}
	}
	return irregularNouns[alias]
}

// endsInShortAlias reports whether w ends in a delete alias shorter than
// leadingAlias ("userdel", "groupdel"). Such an alias is not looked for
// inside words, where its del mostly starts another word ("userdelegation",
// "groupdelivery").
func endsInShortAlias(w string) bool {
	for alias, canon := range verbAliases {
		if canon == "delete" && len(alias) < leadingAlias && len(w) > len(alias) && strings.HasSuffix(w, alias) {
			return true
		}
	}
	return false
}

// leadTails lists the words after which rm or del leading a run-together
// word is a delete: leadObjects and the verb aliases of at least
// minInflected letters ("deltag", "rmposts"), with their -s and -es
// plurals and a final y turned to -ies (some no words, which match nothing
// real: "delentries", "rmpolicies"), and leadFlags.
func leadTails() []string {
	out := slices.Clone(leadFlags)
	add := func(w string) {
		out = append(out, w, w+"s", w+"es")
		if stem, ok := strings.CutSuffix(w, "y"); ok {
			out = append(out, stem+"ies")
		}
	}
	for _, w := range leadObjects {
		add(w)
	}
	for w := range verbAliases {
		if len(w) >= minInflected {
			add(w)
		}
	}
	return out
}

func (d *deleteSpelling) addForm(f string) {
	d.forms[f] = true
	for i := 1; i < len(f); i++ {
		d.prefixes[f[:i]] = true
	}
}

func (d *deleteSpelling) addContained(f string) {
	d.contained[f[:minContainedAlias]] = append(d.contained[f[:minContainedAlias]], f)
}

// in reports whether a name's words spell a delete: a word by itself
// (matches; at its start only where atStart, which may be nil, says so),
// or adjacent pieces that join into an alias or an inflection or noun of
// one ("re move", "d-e-l-e-t-e", "wi ped", "dele tion"). Joined pieces are
// not searched: "user asset" contains no erase, nor "dr options" a drop.
func (d *deleteSpelling) in(ws []string, atStart []bool) bool {
	var buf [64]byte // names are short: no allocation on the decision path
	joined := buf[:0]
	for i, w := range ws {
		if d.matches(w, atStart != nil && atStart[i]) {
			return true
		}
		joined = append(joined[:0], w...)
		for _, next := range ws[i+1:] {
			if !d.prefixes[string(joined)] {
				break
			}
			joined = append(joined, next...)
			if d.forms[string(joined)] {
				return true
			}
		}
	}
	return false
}

// matches reports whether w is a delete alias or an inflection or noun of
// one, starts with an alias of leadingAlias letters (not a compound) or
// with a shorter one followed by exactly a leadTails word, or contains one
// of at least minContainedAlias letters: anywhere, or with atStart at its
// start.
func (d *deleteSpelling) matches(w string, atStart bool) bool {
	return d.forms[w] || d.leads(w) || d.contains(w, atStart)
}

func (d *deleteSpelling) leads(w string) bool {
	for _, alias := range d.short {
		if rest, ok := strings.CutPrefix(w, alias); ok && d.tails[rest] {
			return true
		}
	}
	for _, alias := range d.leading {
		if len(w) > len(alias) && strings.HasPrefix(w, alias) {
			return !slices.ContainsFunc(d.compounds, func(c string) bool { return strings.HasPrefix(w, c) })
		}
	}
	return false
}

func (d *deleteSpelling) contains(w string, atStart bool) bool {
	last := len(w) - minContainedAlias
	if atStart {
		last = min(last, 0)
	}
	for i := 0; i <= last; i++ {
		for _, alias := range d.contained[w[i:i+minContainedAlias]] {
			if strings.HasPrefix(w[i:], alias) {
				return true
			}
		}
	}
	return false
}

// skeletonLetters maps what stands in for a Latin letter in an obfuscated
// spelling ("de1ete", "dr0p", "de|ete", "dełete") to the letter, in the
// spirit of Unicode UTS #39 skeletons. l, i (a folded I), 1, | and ! all
// read as l, so "deIete" and "w1pe" match delete and wipe, whose skeletons
// are taken the same way. Keys are folded.
var skeletonLetters = map[rune]rune{
	'0': 'o', '1': 'l', '3': 'e', '4': 'a', '5': 's', '7': 't', '8': 'b', '9': 'g',
	'i': 'l', '|': 'l', '!': 'l', '$': 's', '@': 'a', '€': 'e',
	'ł': 'l', 'ƚ': 'l', 'ɫ': 'l', 'ɬ': 'l', 'ӏ': 'l', 'ɨ': 'l', 'đ': 'd', 'ɗ': 'd', 'ɖ': 'd',
	'ø': 'o', 'ŧ': 't', 'ħ': 'h', 'ɇ': 'e', 'ɍ': 'r', 'ʉ': 'u', 'ƀ': 'b', 'ǥ': 'g', 'ȼ': 'c', 'ƶ': 'z',
}

// skeleton is the skeleton of a folded word: its stand-ins read as the
// letters they stand for (skeletonLetters).
func skeleton(w string) string { return strings.Map(skeletonRune, w) }

// skeletonRune is the letter r stands for in a skeleton, or r.
func skeletonRune(r rune) rune {
	if l, ok := skeletonLetters[r]; ok {
		return l
	}
	return r
}

// standsForLetter reports whether r stands for another letter in a
// skeleton.
func standsForLetter(r rune) bool {
	_, ok := skeletonLetters[r]
	return ok
}

// isWordRune reports whether r belongs to a word: a letter or digit.
func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// skeletonSymbols are the keys of skeletonLetters that are not letters or
// digits, and so would separate words.
const skeletonSymbols = "|!$@€"

// isSkeletonRune is isWordRune that also keeps skeletonSymbols ("de|ete").
func isSkeletonRune(r rune) bool { return isWordRune(r) || strings.ContainsRune(skeletonSymbols, r) }

// isStandIn reports whether r is a digit or symbol that may stand for a
// letter in a skeleton.
func isStandIn(r rune) bool { return unicode.IsDigit(r) || strings.ContainsRune(skeletonSymbols, r) }
