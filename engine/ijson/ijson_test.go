package ijson_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine/ijson"
)

func TestCheck(t *testing.T) {
	cases := []struct {
		name, body string
		offset     int    // of the error; -1 when the body passes
		problem    string // of the error
	}{
		{"ASCII", `{"to":"acct-1"}`, -1, ""},
		{"two-, three- and four-byte UTF-8", `{"to":"é€😀"}`, -1, ""},
		{"a literal U+FFFD is a character like any other", "{\"to\":\"acct-\uFFFD\"}", -1, ""},
		{"escaped U+FFFD", `{"to":"acct-\ufffd"}`, -1, ""},
		{"surrogate pair", `{"to":"\ud83d\ude00"}`, -1, ""},
		{"surrogate pair, upper-case hex", `{"to":"\uD83D\uDE00"}`, -1, ""},
		{"escaped backslash before u", `{"to":"\\ud800"}`, -1, ""},
		{"other escapes", `{"to":"\"\\\/\b\f\n\r\t\u0041"}`, -1, ""},
		{"malformed escape is the parser's", `{"to":"\x"}`, -1, ""},
		{"short escape is the parser's", `{"to":"\u12"}`, -1, ""},
		{"trailing backslash is the parser's", `\`, -1, ""},
		{"0xff", "{\"to\":\"acct-\xff\"}", 12, ijson.ProblemUTF8},
		{"0xfe", "{\"to\":\"acct-\xfe\"}", 12, ijson.ProblemUTF8},
		{"stray continuation byte", "{\"to\":\"\x80\"}", 7, ijson.ProblemUTF8},
		{"truncated sequence", "{\"to\":\"\xe2\x82\"}", 7, ijson.ProblemUTF8},
		{"overlong slash", "{\"to\":\"\xc0\xaf\"}", 7, ijson.ProblemUTF8},
		{"overlong NUL", "{\"to\":\"\xe0\x80\x80\"}", 7, ijson.ProblemUTF8},
		{"encoded surrogate", "{\"to\":\"\xed\xa0\x80\"}", 7, ijson.ProblemUTF8},
		{"past U+10FFFF", "{\"to\":\"\xf4\x90\x80\x80\"}", 7, ijson.ProblemUTF8},
		{"in a key", "{\"t\xffo\":1}", 3, ijson.ProblemUTF8},
		{"outside strings", "{\"to\":1}\xff", 8, ijson.ProblemUTF8},
		{"lone high surrogate", `{"to":"\ud800"}`, 7, ijson.ProblemLoneSurrogate},
		{"lone high surrogate, last of its kind", `{"to":"\udbff"}`, 7, ijson.ProblemLoneSurrogate},
		{"lone low surrogate", `{"to":"\udc00"}`, 7, ijson.ProblemLoneSurrogate},
		{"high surrogate before a letter", `{"to":"\ud800\u0041"}`, 7, ijson.ProblemLoneSurrogate},
		{"two high surrogates", `{"to":"\ud800\ud800"}`, 7, ijson.ProblemLoneSurrogate},
		{"low then high", `{"to":"\udc00\ud800"}`, 7, ijson.ProblemLoneSurrogate},
		{"pair then a lone one", `{"to":"\ud83d\ude00\ud800"}`, 19, ijson.ProblemLoneSurrogate},
		{"high surrogate at the end", `\ud800`, 0, ijson.ProblemLoneSurrogate},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := ijson.Check([]byte(c.body))
			if c.offset < 0 {
				require.NoError(t, err)
				return
			}
			require.Equal(t, &ijson.Error{Offset: c.offset, Problem: c.problem}, err)
			assert.Contains(t, err.Error(), "RFC 7493")
		})
	}
}

// TestCheckSeparatesWhatDecodingMerges is the defect the check closes: the
// bodies of each pair decode to the same value, so an approval of one would
// cover the other; the check refuses both.
func TestCheckSeparatesWhatDecodingMerges(t *testing.T) {
	for _, pair := range [][2]string{
		{"{\"to\":\"acct-\xff\"}", "{\"to\":\"acct-\xfe\"}"},
		{`{"to":"acct-\ud800"}`, `{"to":"acct-\udbff"}`},
		{"{\"to\":\"acct-\xc0\xaf\"}", "{\"to\":\"acct-\xc1\xbf\"}"},
	} {
		var a, b any
		require.NoError(t, json.Unmarshal([]byte(pair[0]), &a))
		require.NoError(t, json.Unmarshal([]byte(pair[1]), &b))
		require.Equal(t, a, b, "encoding/json merges %q and %q", pair[0], pair[1])
		assert.Error(t, ijson.Check([]byte(pair[0])))
		assert.Error(t, ijson.Check([]byte(pair[1])))
	}
}

// FuzzCheck checks the check against encoding/json: a well-formed body the
// check passes decodes without any replacement, so every U+FFFD in its
// values was in the body, literally or escaped; and a refusal names a real
// fault.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{"to":"acct-1"}`, "{\"to\":\"acct-\xff\"}", `{"to":"\ud800"}`,
		`{"to":"\ud83d\ude00"}`, `{"\\ud800":"\\"}`, "[\"\xed\xa0\x80\"]", `["\uDBFF\uDFFF"]`, `"\ufffd"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		err := ijson.Check(body)
		if err != nil {
			e, ok := err.(*ijson.Error)
			require.True(t, ok)
			require.GreaterOrEqual(t, e.Offset, 0)
			require.Less(t, e.Offset, len(body))
			if e.Problem == ijson.ProblemUTF8 {
				require.False(t, utf8.Valid(body))
			} else {
				require.Equal(t, `\u`, string(body[e.Offset:e.Offset+2]))
			}
			return
		}
		require.True(t, utf8.Valid(body))
		var v any
		if json.Unmarshal(body, &v) != nil {
			return
		}
		if hasReplacement(v) {
			require.True(t, bytes.Contains(body, []byte("\uFFFD")) || strings.Contains(strings.ToLower(string(body)), `\ufffd`),
				"%q decodes with a U+FFFD it does not hold", body)
		}
	})
}

// hasReplacement reports whether a decoded JSON value holds U+FFFD in a
// string or a key.
func hasReplacement(v any) bool {
	switch v := v.(type) {
	case string:
		return strings.ContainsRune(v, utf8.RuneError)
	case []any:
		for _, x := range v {
			if hasReplacement(x) {
				return true
			}
		}
	case map[string]any:
		for k, x := range v {
			if strings.ContainsRune(k, utf8.RuneError) || hasReplacement(x) {
				return true
			}
		}
	}
	return false
}
