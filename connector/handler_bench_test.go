package connector

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

// nopLedger records nothing: the benchmark measures the connector's own
// work, not SQLite's.
type nopLedger struct{}

func (nopLedger) Record(context.Context, []Row) error { return nil }

// BenchmarkGuardrailHandler is the connector's own CPU work for one
// guardrail call with one tool call (fixture 01): reading the body,
// binding, classifying, building and checking the envelope, and the
// answer — with the engine and the ledger replaced by no-ops. The end to
// end figure, engine and ledger included, is BenchmarkConnectorAddedLatency
// in cmd.
func BenchmarkGuardrailHandler(b *testing.B) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "shared", "fixtures", "litellm", "requests", "01_post_call_single_read_tool_call.json"))
	require.NoError(b, err)
	src := testTenancy(b)
	counters := &Counters{}
	g := NewGovernor(GovernorConfig{Mode: ModeEnforce, Decider: &fakeDecider{decision: Decision{Decision: "allow", DecisionID: "d"}},
		Tenancy: src, Ledger: nopLedger{}, Counters: counters, Log: zerolog.Nop()})
	h := NewServer(ServerConfig{Token: "k", Tenancy: src, Counters: counters, Log: zerolog.Nop(), Governor: g}).Handler()
	body := string(raw)
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, GuardrailPath, strings.NewReader(body))
		req.Header.Set("x-api-key", "k")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 200 || !strings.Contains(w.Body.String(), "NONE") {
			b.Fatal(w.Body.String())
		}
	}
}
