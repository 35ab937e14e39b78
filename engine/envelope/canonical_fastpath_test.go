package envelope

import (
	"math/rand/v2"
	"testing"
)

// TestCleanFoldASCIIFastPath: for printable ASCII, Clean and Fold take a
// shortcut (NFKC, the control filter and the confusables map keep such text
// as is, and case folding only lowers it); it must give what the full path
// gives.
func TestCleanFoldASCIIFastPath(t *testing.T) {
	check := func(s string) {
		if Clean(s) != cleanUnicode(s) || Fold(s) != foldUnicode(s) {
			t.Fatalf("fast path differs on %q", s)
		}
	}
	for c := ' '; c <= '~'; c++ {
		for d := ' '; d <= '~'; d++ {
			check(string(c) + string(d))
			check(" " + string(c) + " " + string(d) + " ")
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		b := make([]byte, rng.IntN(16))
		for i := range b {
			b[i] = byte(' ' + rng.IntN(95))
		}
		check(string(b))
	}
}

// TestVerbWordsASCIIFastPath: verb and ability names of printable ASCII
// are split from their Clean form rather than bare, and their words keep
// their letters rather than being decomposed (undiacritic); both must give
// what the full path gives.
func TestVerbWordsASCIIFastPath(t *testing.T) {
	check := func(s string) {
		if bare(s) != Clean(s) || undiacriticUnicode(Fold(s)) != Fold(s) {
			t.Fatalf("fast path differs on %q", s)
		}
	}
	for c := ' '; c <= '~'; c++ {
		for d := ' '; d <= '~'; d++ {
			check(string(c) + string(d))
		}
	}
	rng := rand.New(rand.NewPCG(5, 9))
	for range 100000 {
		b := make([]byte, rng.IntN(16))
		for i := range b {
			b[i] = byte(' ' + rng.IntN(95))
		}
		check(string(b))
	}
}
