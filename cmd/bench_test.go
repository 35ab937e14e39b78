package cmd

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine/envelope"
	"github.com/svc-dev/svc/engine/opa"
)

// TestBenchAnswer judges answers an engine, or a broken one, could send:
// a 200 or a 500 with a string decision and a non-empty decision_id is an
// answer, anything else an error.
func TestBenchAnswer(t *testing.T) {
	cases := []struct {
		status                 int
		body, verdict, errLike string
	}{
		{200, benchAllowBody, "allow", ""},
		{500, `{"decision":"deny","decision_id":"d1","rule":"x"}`, "deny", ""},
		{200, ` { "decision_id" : "i" , "decision" : "deny" } `, "deny", ""},
		{200, `{"a":{"decision":"x","decision_id":"y"},"b":["decision",{"c":"}"}],"decision":"allow","decision_id":"i"}`,
			"allow", ""},
		{200, `{"n":-1.5e3,"t":true,"z":null,"decision":"allow","decision_id":"i","e":{},"l":[]}`, "allow", ""},
		{200, `{"decision":"al\"low\u00e9\\","decision_id":"i\/d"}`, "al\"lowé\\", ""},
		{200, `{"decisio\u006e":"allow","decision_id":"i"}`, "allow", ""},
		{200, `{"decision":"deny","decision":"allow","decision_id":"i"}`, "allow", ""},
		{200, `{"decision":"allow","decision_id":""}`, "", "answered 200 without a decision"},
		{400, `{"decision":"deny","rule":"svc_invalid_request","error":"x"}`, "", "answered 400: the body lacks"},
		{403, `{"decision":"deny","decision_id":"d1"}`, "", "answered 403 without a decision"},
		{200, `{"decision":"allow"}`, "", "lacks decision or decision_id"},
		{200, `{"decision_id":"i"}`, "", "lacks decision or decision_id"},
		{200, `{"decision":null,"decision_id":"i"}`, "", "lacks decision or decision_id"},
		{200, `{"decision":"allow","decision_id":7}`, "", "not a JSON answer"},
		{200, `{"decision":"allow","decision_id":{"x":"i"}}`, "", "not a JSON answer"},
		{200, `["decision","allow"]`, "", "not a JSON answer"},
		{200, `{"decision":"allow","decision_id":"i"} {}`, "", "not a JSON answer"},
		{200, `{"decision":"allow","decision_id":"i"`, "", "not a JSON answer"},
		{200, "", "", "not a JSON answer"},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%d %s", c.status, c.body), func(t *testing.T) {
			verdict, err := benchAnswer(c.status, []byte(c.body))
			if c.errLike != "" {
				require.ErrorContains(t, err, c.errLike)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, c.verdict, verdict)
		})
	}
}

// TestBenchEnvelope checks the appended envelope against the fmt format it
// replaced, and that the engine accepts it.
func TestBenchEnvelope(t *testing.T) {
	for _, k := range benchMix {
		for _, seq := range []int{0, 7, 149} {
			session := fmt.Sprintf("r1-1763700000000000000w-%d", seq*3)
			want := fmt.Sprintf(`{"svc_version":"0.2","agent":{"id":"bench-%s","on_behalf_of":"human:bench-%s",`+
				`"session_id":%q},"action":{"namespace":"db","verb":%q,"ability":"db/%s"},"target":{"kind":"table",`+
				`"ref":"bench.t%d","environment":%q},"params":{"seq":%d},"magnitude":{"count":%d},"axes":{`+
				`"reversibility":%q,"blast_radius":%q,"externality":%q},"approval":{"present":false,"hold_id":null},`+
				`"context":{},"meta":{"timestamp":"2026-01-01T00:00:00Z","nonce":"%s-%d","signature":"stub"}}`,
				session, session, session, k.verb, k.verb, seq%50, k.environment, seq, k.maxCount,
				k.reversibility, k.blast, k.ext, session, seq)
			got := benchEnvelope([]byte("old"), k, session, seq, k.maxCount)
			require.Equal(t, "old"+want, string(got))
			env, err := envelope.ParseEnvelope(got[3:])
			require.NoError(t, err)
			assert.Equal(t, session, env.Agent.SessionID)
		}
	}
}

// BenchmarkBenchClient measures what one decide costs the load generator,
// raw and with net/http, against a canned loopback server: cpu-µs/op is
// the process's CPU time (the canned server's share included) per request.
//
//	go test -run '^$' -bench BenchClient -benchtime 20000x ./cmd
func BenchmarkBenchClient(b *testing.B) {
	reply := cannedReply("HTTP/1.1 200 OK", "", benchAllowBody)
	url := startCannedServer(b, func(int64) string { return reply })
	for _, name := range []string{"raw", "net-http"} {
		b.Run(name, func(b *testing.B) {
			c, err := newBenchClient(benchParams{url: url, concurrency: []int{1}})
			require.NoError(b, err)
			if name == "net-http" {
				c.target, c.http = nil, newBenchHTTP(1)
			}
			d := c.deciders(1)[0]
			defer func() { _ = c.Close() }()
			envelope := benchEnvelope(nil, benchMix[0], "bench-1", 1, 1)
			b.ReportAllocs()
			cpu := processCPU(b)
			for b.Loop() {
				if _, err := d.decide(b.Context(), envelope); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N)/1e3, "cpu-µs/op")
		})
	}
}

// BenchmarkBenchEnvelope measures the formatting of one envelope.
func BenchmarkBenchEnvelope(b *testing.B) {
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		buf = benchEnvelope(buf[:0], benchMix[3], "r0-1763700000000000000-123", 4567, 3)
	}
}

// processCPU is the user and system CPU time of the process so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestFlagPlaceholders pins the value placeholder `--help` shows for each
// flag of bench and decide: pflag takes it from the first `quoted` word of
// the usage, so a quoted command in a usage would become the placeholder.
func TestFlagPlaceholders(t *testing.T) {
	tests := []struct {
		cmd  *cobra.Command
		want map[string]string
	}{
		{newBenchCommand(), map[string]string{
			"url": "URL", "token": "token", "label": "label", "wrk": "path", "concurrency": "counts", "duration": "duration",
			"sessions": "n", "pid": "pid", "procs": "n", "opa-runs": "n", "opa-bin": "path", "policy-dir": "dir",
		}},
		{newDecideCommand(), map[string]string{"file": "path"}},
	}
	flagLine := regexp.MustCompile(`(?m)^ +(?:-\w, )?--([\w-]+) (\S+)  `)
	for _, tt := range tests {
		t.Run(tt.cmd.Name(), func(t *testing.T) {
			usages := tt.cmd.Flags().FlagUsages()
			got := map[string]string{}
			for _, m := range flagLine.FindAllStringSubmatch(usages, -1) {
				got[m[1]] = m[2]
			}
			assert.Equal(t, tt.want, got, usages)
			assert.NotContains(t, usages, "`")
		})
	}
}

// TestOPAEvalsCountFailedRuns: a baseline run that fails is counted as an
// error and the others still time; only a baseline without one success
// fails.
func TestOPAEvalsCountFailedRuns(t *testing.T) {
	dir := t.TempDir()
	counter := filepath.Join(dir, "n")
	fake := filepath.Join(dir, "opa")
	script := `#!/bin/sh
n=$(cat ` + counter + ` 2>/dev/null || echo 0); echo $((n+1)) > ` + counter + `
if [ $((n % 3)) -eq 0 ]; then echo "starved" >&2; exit 1; fi
echo '{"result":[{"expressions":[{"value":{"decision":"allow","rule":"svc.policy/default_allow","reason":"ok"}}]}]}'
`
	require.NoError(t, os.WriteFile(fake, []byte(script), 0o700))
	eval := opa.NewEvalEvaluator(fake, dir, 10*time.Second)
	r, err := opaEvals(t.Context(), eval, []byte(`{}`), 1, 9)
	require.NoError(t, err)
	assert.Equal(t, 3, r.errors)
	assert.Len(t, r.latencies, 6)

	_, err = opaEvals(t.Context(), opa.NewEvalEvaluator(filepath.Join(dir, "missing"), dir, 10*time.Second), []byte(`{}`), 2, 4)
	assert.ErrorContains(t, err, "no run succeeded (4 errors")
}

// TestRedactURL: a password never reaches a message, also from a URL that
// does not parse.
func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:8080":                  "http://127.0.0.1:8080",
		"http://user:secret@127.0.0.1:8080":      "http://user:xxxxx@127.0.0.1:8080",
		"http://user:secret@127.0.0.1:19120/%zz": "…@127.0.0.1:19120/%zz",
		"http://user:secret@":                    "…@",
		"user:secret@host:1/%zz":                 "…@host:1/%zz",
		"not a url":                              "not a url",
		"http://u:12/secret@h":                   "…@h",
		"http://u:123?x@h":                       "…@h",
	} {
		got := redactURL(in)
		assert.Equal(t, want, got, in)
	}
}
