package engine

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

// namesDelete reports whether a verb or ability name spells a delete,
// either in its folded words ws or in their skeletons, where digits and
// symbols that stand for letters read as those letters. A name with such
// stand-ins is also split again with them inside words (skeletonBoundary):
// in ws symbols separate words, and an upper-case letter after a digit
// starts one ("DR0PTABLE" → DR0, PTABLE).
func namesDelete(name string, ws []string) bool {
	if plainDeletes.in(ws) || skeletonDeletes.in(skeletons(ws)) {
		return true
	}
	if !printableASCII(name) {
		name = bare(name)
	}
	if !strings.ContainsFunc(name, isStandIn) {
		return false
	}
	return skeletonDeletes.in(skeletons(words(name, isSkeletonRune, skeletonBoundary)))
}

func skeletons(ws []string) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = skeleton(w)
	}
	return out
}

// skeletonBoundary is camelBoundary where a digit or symbol stands for a
// letter of the word it is in, and so ends no word: "DR0PTABLE" and
// "De1User" are one word, as "dr0ptable" and "de1user" are.
func skeletonBoundary(runes []rune, i int) bool {
	return !isStandIn(runes[i-1]) && camelBoundary(runes, i)
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
	"account", "all", "backup", "branch", "bucket", "cache", "data", "db", "dir", "disk", "file", "group",
	"index", "instance", "item", "key", "log", "node", "obj", "object", "pod", "record", "repo", "row",
	"snapshot", "table", "tag", "tree", "user", "vm", "volume",
}

// leadFlags are the options of rm that its run-together spellings carry
// ("hdfs_rmr", "rmrf").
var leadFlags = []string{"r", "rf"}

// irregularNouns are the nouns of delete aliases that are not the -ion
// form of an alias ending in te or ct (nouns derives those).
var irregularNouns = map[string][]string{
	"remove": {"removal"}, "erase": {"erasure"}, "destroy": {"destruction"}, "expunge": {"expungement"},
}

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

// plainDeletes recognises the aliases in folded words; skeletonDeletes in
// skeletons, where aliases shorter than leadingAlias only lead words
// before a leadTails word ("de1user"): "de1" and "dei" are no del.
var (
	plainDeletes    = newDeleteSpelling(func(s string) string { return s }, 1)
	skeletonDeletes = newDeleteSpelling(skeleton, leadingAlias)
)

func newDeleteSpelling(key func(string) string, minLen int) *deleteSpelling {
	d := &deleteSpelling{forms: map[string]bool{}, prefixes: map[string]bool{}, contained: map[string][]string{},
		tails: map[string]bool{}}
	for w, canon := range verbAliases {
		if canon != "delete" {
			continue
		}
		if len(w) < leadingAlias {
			d.short = append(d.short, key(w)) // in skeletons too: "de1user" leads with del
		}
		if len(w) >= minLen {
			d.addAlias(w, key)
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

// addAlias adds the spellings of one delete alias w, taken by key.
func (d *deleteSpelling) addAlias(w string, key func(string) string) {
	d.addForm(key(w))
	if len(w) >= minInflected {
		for _, f := range inflections(w, true) {
			d.addForm(key(f))
		}
	}
	for _, n := range nouns(w) {
		d.addForm(key(n))
		d.addForm(key(n + "s"))
		if len(n) >= minContainedAlias {
			d.addContained(key(n))
		}
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
// plurals (some no words, which match nothing real), and leadFlags.
func leadTails() []string {
	out := slices.Clone(leadFlags)
	add := func(w string) { out = append(out, w, w+"s", w+"es") }
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
// (matches), or adjacent pieces that join into an alias or an inflection
// or noun of one ("re move", "d-e-l-e-t-e", "wi ped", "dele tion"). Joined
// pieces are not searched: "user asset" contains no erase, nor "dr
// options" a drop.
func (d *deleteSpelling) in(ws []string) bool {
	var joined []byte
	for i, w := range ws {
		if d.matches(w) {
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
// of at least minContainedAlias letters.
func (d *deleteSpelling) matches(w string) bool {
	return d.forms[w] || d.leads(w) || d.contains(w)
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

func (d *deleteSpelling) contains(w string) bool {
	for i := 0; i+minContainedAlias <= len(w); i++ {
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

func skeleton(w string) string {
	return strings.Map(func(r rune) rune {
		if l, ok := skeletonLetters[r]; ok {
			return l
		}
		return r
	}, w)
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
