package cmd

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/viper"
)

// settingSets are the keys of every command's settings, each read from
// SVC_<KEY>: a command with settings of its own adds its defaults here, so
// that its variables are not reported as unknown.
var settingSets = []map[string]any{serveDefaults, clientDefaults, connectorDefaults, tlsDefaults, retentionDefaults}

// otherVariables are SVC_* variables read by the scripts, the tests or the
// in-process LiteLLM module (connector/python), not by svc.
var otherVariables = []string{"SVC_VENV", "SVC_BIN", "SVC_OPA_BIN", "SVC_E2E_WRITE_CAPTURES",
	"SVC_CONNECTOR_URL", "SVC_CONNECTOR_CA_FILE", "SVC_E2E_WRITE_SCREENSHOTS"}

// knownVariables returns every SVC_* variable name svc or its scripts read.
func knownVariables() []string {
	names := slices.Clone(otherVariables)
	for _, set := range settingSets {
		for key := range set {
			names = append(names, envName(key))
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// unknownVariables returns a warning for each SVC_* variable of environ
// that no setting reads, naming the closest known one: a misspelled
// SVC_PROT would otherwise be ignored without a word.
func unknownVariables(environ []string) []string {
	known := knownVariables()
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "SVC_") || slices.Contains(known, name) {
			continue
		}
		out = append(out, fmt.Sprintf("%s is not a setting svc reads; did you mean %s?", name, closest(name, known)))
	}
	slices.Sort(out)
	return out
}

// checkFileKeys refuses a settings file holding a key that is not a
// setting (a typo, an upper-case SVC_PORT, a nested section), which viper
// would otherwise ignore.
func checkFileKeys(path string, defaults map[string]any) error {
	f := viper.New()
	f.SetConfigFile(path)
	if err := f.ReadInConfig(); err != nil {
		return fmt.Errorf("read config file %s: %w", path, err)
	}
	keys := slices.Sorted(maps.Keys(defaults))
	for _, k := range f.AllKeys() {
		if _, ok := defaults[k]; ok {
			continue
		}
		return fmt.Errorf("config file %s: unknown key %q (keys are the SVC_ names without the prefix, in lower case); did you mean %q?",
			path, k, closest(strings.TrimPrefix(k, "svc_"), keys))
	}
	return nil
}

// closest returns the name of names nearest to s by edit distance, ignoring
// case.
func closest(s string, names []string) string {
	best, bestDist := "", -1
	for _, n := range names {
		if d := editDistance(strings.ToLower(s), strings.ToLower(n)); bestDist < 0 || d < bestDist {
			best, bestDist = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
