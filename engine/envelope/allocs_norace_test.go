//go:build !race

package envelope

// Tests of allocation counts and allocated bytes. The race detector's
// instrumentation allocates (and runs finalizers and background work) at its
// own pace, so these counts are not stable under -race: this file is left out
// of race builds, and scripts/test runs its tests in a separate run without
// -race (go test -run 'Allocs$'). Every test here is named ...Allocs so that
// run finds it; TestAllocationTestsStayOutOfRaceBuilds (repo_test.go) keeps
// new ones here.

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestExactMembersAllocs checks that reading the members of a verdict,
// on the decision path, allocates nothing.
func TestExactMembersAllocs(t *testing.T) {
	doc := []byte(`{"decision":"deny","rule":"svc.policy/strict","reason":"policy says deny","extra":{"k":[1,2]}}`)
	names := []string{"decision", "rule", "reason"}
	var values [3]json.RawMessage
	allocs := testing.AllocsPerRun(100, func() {
		if err := ExactMembers(doc, names, values[:]); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
}

// TestCanonicalVerbAllocs: CanonicalVerb, on the decision path, costs no
// more allocations than verbCases allow.
func TestCanonicalVerbAllocs(t *testing.T) {
	for _, c := range verbCases {
		n := testing.AllocsPerRun(100, func() { CanonicalVerb(c.verb, c.ability, "recoverable") })
		assert.LessOrEqual(t, n, c.allocs, "verb %q ability %q", c.verb, c.ability)
	}
}

// TestExactNumberAllocs checks that no literal costs more than its length:
// a huge exponent or a long run of digits allocates nothing.
func TestExactNumberAllocs(t *testing.T) {
	for _, lit := range []string{"1e-100000000", "1e100000000", "0.1e-99999999999999999999",
		"1" + strings.Repeat("0", 100000) + "1", "1." + strings.Repeat("0", 100000) + "1e100000"} {
		b := []byte(lit)
		// Bytes rather than a count of allocations: the runtime's counters
		// are global, and goroutines of earlier tests may still allocate a
		// little; a number materialised from such a literal would take
		// megabytes.
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range 10 {
			exactNumber(b)
		}
		runtime.ReadMemStats(&after)
		assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(256<<10), "%.20s…", lit)
		assert.False(t, exactNumber(b))
	}
}
