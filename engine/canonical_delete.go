package engine

// The spellings of a delete that canonicalisation sees through beyond the
// alias table: inflections, words run together or split apart, and digits
// or symbols standing for letters. They only ever make a verb delete, the
// strictest class, so a false positive charges a budget and never loosens
// anything.

import (
	"slices"
	"strings"
	"unicode"
)

// namesDelete reports whether a verb or ability name spells a delete,
// either in its folded words ws or in their skeletons, where digits and
// symbols that stand for letters read as those letters. The name is split
// again only if it has such symbols, which otherwise separate words.
func namesDelete(name string, ws []string) bool {
	if plainDeletes.in(ws) {
		return true
	}
	if !printableASCII(name) {
		name = bare(name)
	}
	if strings.ContainsAny(name, skeletonSymbols) {
		ws = words(name, isSkeletonRune)
	}
	skel := make([]string, len(ws))
	for i, w := range ws {
		skel[i] = skeleton(w)
	}
	return skeletonDeletes.in(skel)
}

// minContainedAlias is the length, in letters, from which a delete alias
// (or its -ing form) is looked for inside a longer word. Shorter aliases
// (rm, del) match whole words only: inside words they are mostly noise
// ("format", "delivery"); those of leadingAlias letters also start words.
const minContainedAlias = 5

// leadingAlias is the length of the delete aliases (drop, nuke, void, wipe,
// rmrf) that are found at the start of a run-together word ("droptable",
// "wipedisk"), but not elsewhere in it ("backdrop", "avoid", "swipe").
const leadingAlias = 4

// compounds are words that start with a leadingAlias delete alias and
// name no deletion (their plurals and longer words starting with them
// neither).
var compounds = []string{"dropbox", "dropcap", "dropdown", "droplet", "dropoff", "dropout", "dropship", "dropzone"}

// deleteSpelling recognises the delete aliases in the words of a name as
// spelled in one form: folded, or skeletons of folded words. Only delete's
// are sought inside words, joined pieces and skeletons: the other verbs'
// aliases are nouns as often as verbs, and found this way would turn reads
// into writes ("list_orders", "get_messages"), while a false delete only
// makes the verb the strictest.
type deleteSpelling struct {
	forms     map[string]bool     // the aliases and their inflections
	prefixes  map[string]bool     // the prefixes of forms: pieces worth joining
	contained map[string][]string // by their first minContainedAlias bytes
	leading   []string
	compounds []string
}

// plainDeletes recognises the aliases in folded words; skeletonDeletes in
// skeletons, leaving out aliases shorter than leadingAlias: "de1" and "dei"
// are no del.
var (
	plainDeletes    = newDeleteSpelling(func(s string) string { return s }, 1)
	skeletonDeletes = newDeleteSpelling(skeleton, leadingAlias)
)

func newDeleteSpelling(key func(string) string, minLen int) *deleteSpelling {
	d := &deleteSpelling{forms: map[string]bool{}, prefixes: map[string]bool{}, contained: map[string][]string{}}
	for w, canon := range verbAliases {
		if canon != "delete" || len(w) < minLen {
			continue
		}
		d.addForm(key(w))
		if len(w) >= minInflected {
			for _, f := range inflections(w, true) {
				d.addForm(key(f))
			}
		}
		if len(w) == leadingAlias {
			d.leading = append(d.leading, key(w))
		}
		if len(w) >= minContainedAlias {
			d.addContained(key(w))
		}
		if stem, ok := strings.CutSuffix(w, "e"); ok && len(w) >= minContainedAlias {
			d.addContained(key(stem + "ing")) // "deleting" contains no "delete"
		}
	}
	for _, c := range compounds {
		d.compounds = append(d.compounds, key(c))
	}
	return d
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
// of one ("re move", "d-e-l-e-t-e", "wi ped"). Joined pieces are not
// searched: "user asset" contains no erase, nor "dr options" a drop.
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

// matches reports whether w is a delete alias or an inflection of one,
// starts with an alias of leadingAlias letters (not a compound) or
// contains one of at least minContainedAlias letters.
func (d *deleteSpelling) matches(w string) bool {
	return d.forms[w] || d.leads(w) || d.contains(w)
}

func (d *deleteSpelling) leads(w string) bool {
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
