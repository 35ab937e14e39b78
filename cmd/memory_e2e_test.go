package cmd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
	envpkg "github.com/svc-dev/svc/engine/envelope"
	"github.com/svc-dev/svc/holds"
	"github.com/svc-dev/svc/ledger"
)

// plainBin is the svc binary built without the race detector, whose
// shadow memory would swamp a measure of svc's own (see plainSvc).
var (
	plainOnce sync.Once
	plainBin  string
	plainErr  error
)

// plainSvc builds, once, the svc binary without the race detector.
func plainSvc(t *testing.T) string {
	t.Helper()
	plainOnce.Do(func() {
		plainBin = filepath.Join(filepath.Dir(svcBin), "svc-plain")
		out, err := exec.Command("go", "build", "-o", plainBin, "github.com/svc-dev/svc").CombinedOutput()
		if err != nil {
			plainErr = fmt.Errorf("build svc: %w\n%s", err, out)
		}
	})
	require.NoError(t, plainErr)
	return plainBin
}

// peakRSS returns the peak resident memory (VmHWM) of process pid, in
// bytes, from /proc.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			require.NoError(t, err)
			return kib << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// fillHolds writes n pending holds of about paramBytes of params each into
// the database at path, as n decisions of an agent would have.
func fillHolds(t *testing.T, path string, n, paramBytes int) {
	t.Helper()
	ctx := context.Background()
	db, err := ledger.Open(ctx, path, ledger.DurabilityOS)
	require.NoError(t, err)
	defer func() { require.NoError(t, db.Close()) }()
	store, err := holds.NewStore(ctx, db.SQL())
	require.NoError(t, err)
	tx, err := db.SQL().BeginTx(ctx, nil)
	require.NoError(t, err)
	now := time.Now()
	for i := range n {
		h := engine.Hold{ID: fmt.Sprintf("h-%04d", i), Rule: "svc.policy/irreversible_broad_prod", Reason: "held",
			Envelope: &envpkg.Envelope{SvcVersion: "0.2", Mode: envpkg.ModeEnforce,
				Agent:  envpkg.Agent{ID: "agent-7", SessionID: "sess-1"},
				Action: envpkg.Action{Verb: "delete", Ability: "db/delete_rows"},
				Target: envpkg.Target{Environment: "production"},
				Params: map[string]any{"rows": strings.Repeat("r", paramBytes)}, Magnitude: envpkg.Magnitude{Count: 1},
				Axes: envpkg.Axes{Reversibility: "irreversible", BlastRadius: "broad", Externality: "internal"}},
			EnvelopeHash: "e", ParamsHash: "p", CreatedTS: now.Add(time.Duration(i) * time.Millisecond),
			ExpiresTS: now.Add(time.Hour), DecisionID: fmt.Sprintf("d-%04d", i)}
		require.NoError(t, store.CreateIn(ctx, tx, h))
	}
	require.NoError(t, tx.Commit())
}

// listAll pages through GET /v1/holds?limit=1000 and returns how many holds
// it listed. Only the end of each page (count, next_cursor) is decoded.
func listAll(p *engineProc) (int, error) {
	total, cursor := 0, ""
	for {
		q := url.Values{"limit": {"1000"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		resp, err := http.Get(p.URL + "/v1/holds?" + q.Encode())
		if err != nil {
			return total, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			return total, fmt.Errorf("list: %d %v", resp.StatusCode, err)
		}
		i := bytes.LastIndex(body, []byte(`],"count":`))
		if i < 0 {
			return total, fmt.Errorf("list: no count in the page")
		}
		var tail struct {
			Count      int     `json:"count"`
			NextCursor *string `json:"next_cursor"`
		}
		if err := json.Unmarshal(append([]byte("{"), body[i+2:]...), &tail); err != nil {
			return total, err
		}
		total += tail.Count
		if tail.NextCursor == nil {
			return total, nil
		}
		cursor = *tail.NextCursor
	}
}

// TestListingLargeHoldsStaysSmall lists 1,000 holds of 250 KB of params
// each, from four clients at once, each paging with limit=1000: the peak
// resident memory of svc must stay under 100 MiB, as a page is bounded in
// bytes and encoded one hold at a time.
func TestListingLargeHoldsStaysSmall(t *testing.T) {
	env := baseEnv(t)
	fillHolds(t, env["SVC_HOLDS_PATH"], 1000, 250<<10)
	env["SVC_OPA_MODE"] = "server"
	p, err := launchWith(plainSvc(t), env, "svc serving", "serve")
	require.NoError(t, err)
	waitServing(t, p)

	var wg sync.WaitGroup
	counts, errs := make([]int, 4), make([]error, 4)
	for i := range 4 {
		wg.Go(func() { counts[i], errs[i] = listAll(p) })
	}
	wg.Wait()
	for i := range 4 {
		require.NoError(t, errs[i])
		assert.Equal(t, 1000, counts[i], "every hold listed once")
	}
	peak := peakRSS(t, p.cmd.Process.Pid)
	t.Logf("svc peak RSS: %.1f MiB", float64(peak)/(1<<20))
	assert.Less(t, peak, int64(100<<20), "peak RSS of svc under four concurrent worst-case listings")
}
