package envelope

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite golden files")

// hashVector is one published test vector (docs/envelope-hash.md).
type hashVector struct {
	Name       string          `json:"name"`
	Envelope   json.RawMessage `json:"envelope"`
	Canonical  string          `json:"canonical_projection"`
	Hash       string          `json:"envelope_hash"`
	ParamsHash string          `json:"params_hash"`
}

func TestHashVectors(t *testing.T) {
	path := filepath.Join("testdata", "hash_vectors.json")
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var vectors []hashVector
	require.NoError(t, json.Unmarshal(raw, &vectors))
	require.NotEmpty(t, vectors)
	for i, v := range vectors {
		env, err := ParseEnvelope(v.Envelope)
		require.NoError(t, err, v.Name)
		got, err := env.Hash()
		require.NoError(t, err)
		params, err := env.ParamsHash()
		require.NoError(t, err)
		// The published canonical text hashes to the published hash, so a
		// reader can check a vector with nothing but sha256.
		sum := sha256.Sum256([]byte(v.Canonical))
		if *update {
			vectors[i].Hash, vectors[i].ParamsHash = got, params
			continue
		}
		assert.Equal(t, v.Hash, hex.EncodeToString(sum[:]), "%s: canonical text", v.Name)
		assert.Equal(t, v.Hash, got, v.Name)
		assert.Equal(t, v.ParamsHash, params, v.Name)
	}
	if *update {
		out, err := json.MarshalIndent(vectors, "", "  ")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, append(out, '\n'), 0o644))
	}
}

func TestHashBindsProjection(t *testing.T) {
	base := readEnvelope(t, "full.json")
	hashOf := func(body []byte) (string, string) {
		env, err := ParseEnvelope(body)
		require.NoError(t, err)
		h, err := env.Hash()
		require.NoError(t, err)
		p, err := env.ParamsHash()
		require.NoError(t, err)
		return h, p
	}
	h0, p0 := hashOf(base)
	same := map[string]any{"action.verb": "delete", "target.environment": "production",
		"axes.blast_radius": "broad", "agent.session_id": "other", "meta.nonce": "n-2", "context.mode": "enforce"}
	for path, v := range same {
		h, _ := hashOf(mutate(t, base, path, v))
		assert.Equal(t, h0, h, "changing %s must not change the hash", path)
	}
	differ := map[string]any{"target.ref": "core.users", "magnitude.count": 4, "target.environment": "staging",
		"axes.blast_radius": "systemic", "action.ability": "db/drop_table", "target.kind": "view"}
	for path, v := range differ {
		h, _ := hashOf(mutate(t, base, path, v))
		assert.NotEqual(t, h0, h, "changing %s must change the hash", path)
	}
	_, p := hashOf(mutate(t, base, "params.limit", 1001))
	assert.NotEqual(t, p0, p)
	reordered := mutate(t, base, "params", map[string]any{"dry_run": false, "limit": 1000,
		"where": "last_seen_at < now() - interval '30 days'"})
	_, p = hashOf(reordered)
	assert.Equal(t, p0, p)
}

// TestCanonicalProjectionMatchesJCS: the direct JCS writer of the hash
// projection gives, byte for byte, what marshalling and the JCS library
// give, on strings with quotes, backslashes, every control character,
// non-ASCII and line separators, and on counts up to the exact range.
func TestCanonicalProjectionMatchesJCS(t *testing.T) {
	pieces := []string{"", "a", `"`, `\`, "/", "<>&", "\u007f", "é", "\u2028\u2029", "𝄞", "\ufffd", "delete", " x "}
	for c := range 0x20 {
		pieces = append(pieces, string(rune(c)))
	}
	rng := rand.New(rand.NewPCG(7, 8))
	str := func() string {
		var b strings.Builder
		for range rng.IntN(4) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return b.String()
	}
	counts := []int64{0, 1, 7, 1_000_000_000_000, jcsMaxInteger, -jcsMaxInteger}
	for i := range 20000 {
		e := &Envelope{
			Action:    Action{Namespace: str(), Verb: str(), Ability: str()},
			Target:    Target{Kind: str(), Ref: str(), Environment: str()},
			Axes:      Axes{Reversibility: str(), BlastRadius: str(), Externality: str()},
			Magnitude: Magnitude{Count: counts[i%len(counts)]},
		}
		fast, ok := e.canonicalProjection()
		require.True(t, ok)
		raw, err := json.Marshal(e.projection())
		require.NoError(t, err)
		want, err := jcs.Transform(raw)
		require.NoError(t, err)
		require.Equal(t, string(want), string(fast), "envelope %+v", e)
	}
	for _, e := range []*Envelope{
		{Action: Action{Verb: "\xff"}},
		{Magnitude: Magnitude{Count: jcsMaxInteger + 1}},
	} {
		_, ok := e.canonicalProjection()
		assert.False(t, ok, "left to the general path: %+v", e)
		_, err := e.Hash()
		assert.NoError(t, err)
	}
}
