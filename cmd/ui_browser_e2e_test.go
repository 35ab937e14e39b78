package cmd_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// browserStep bounds one step of the browser test: generous, for a
// loaded machine; a real hang still fails.
const browserStep = 90 * time.Second

// chromiumPath finds Debian's Chromium, failing the test (never skipping
// it) when it is missing.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium is not installed: the browser test of the web app needs Debian's chromium; run scripts/install-test-deps")
	return ""
}

// browser starts one headless Chromium for the whole test and returns the
// context of its first tab.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromiumPath(t)), chromedp.NoSandbox,
		chromedp.WindowSize(1440, 900), chromedp.UserDataDir(t.TempDir()))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	require.NoError(t, chromedp.Do(ctx), "start chromium") // no timeout: it would end the browser
	return ctx
}

// person is a new browser context of the one browser: its own cookies, as
// another person's browser.
func person(t *testing.T, b context.Context) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	require.NoError(t, chromedp.Do(ctx))
	return ctx
}

// step runs actions within browserStep.
func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, browserStep)
	defer cancel()
	require.NoError(t, chromedp.Do(sctx, actions...), what)
}

// read runs one action that returns a value, within browserStep.
func read[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, browserStep)
	defer cancel()
	v, err := chromedp.Run(sctx, a)
	require.NoError(t, err, what)
	return v
}

// signinAs fills the sign-in form with token and submits it.
func signinAs(t *testing.T, ctx context.Context, base, token string) {
	t.Helper()
	step(t, ctx, "sign in", chromedp.Navigate(base+"/ui/signin"), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Click(chromedp.ID("signin")))
}

// screenshot saves a PNG of the page of ctx as name in the test's
// directory and, with SVC_E2E_WRITE_SCREENSHOTS=1, in docs/img/ too.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png := read(t, ctx, "screenshot "+name, chromedp.FullScreenshot(100))
	require.True(t, bytes.HasPrefix(png, []byte("\x89PNG")), "a PNG")
	require.NoError(t, os.WriteFile(filepath.Join(t.TempDir(), name), png, 0o644))
	if os.Getenv("SVC_E2E_WRITE_SCREENSHOTS") == "1" {
		require.NoError(t, os.WriteFile(filepath.Join("..", "docs", "img", name), png, 0o644))
	}
}

// TestUIBrowser drives the web app in a real headless Chromium: sign-in
// (a wrong token refused), a hold appearing in the open inbox, its page,
// approve (the re-submission allowed once) and reject, four eyes, a form
// without its CSRF token refused, and a hostile param shown as text.
func TestUIBrowser(t *testing.T) {
	b := browser(t)
	p, _ := uiEngine(t, nil)
	alice := person(t, b)

	signinAs(t, alice, p.URL, "tok-wrong")
	step(t, alice, "wrong token refused", chromedp.WaitVisible(chromedp.ID("problem")))
	assert.Contains(t, read(t, alice, "problem", chromedp.Text(chromedp.ID("problem"))), "not a resolver token")
	assert.Contains(t, read(t, alice, "location", chromedp.Location()), "/ui/signin")

	signinAs(t, alice, p.URL, "tok-alice")
	step(t, alice, "the inbox, empty", chromedp.WaitVisible(chromedp.ID("empty")))
	assert.Contains(t, read(t, alice, "who", chromedp.Text(chromedp.ID("who"))), "human:Alice")

	hostile := `<script>document.title="owned"</script>`
	id, _ := raiseHold(t, p, map[string]any{"agent.on_behalf_of": "human:bob", "target.ref": "billing.invoices",
		"params.where": "issued_at < '2019-01-01'", "params.comment": hostile})
	row := `tr[data-hold="` + id + `"]`
	step(t, alice, "the hold appears in the open inbox", chromedp.WaitVisible(chromedp.CSS(row)))
	screenshot(t, alice, "ui-inbox.png")

	step(t, alice, "open the hold", chromedp.Click(chromedp.CSS(row+" a")), chromedp.WaitVisible(chromedp.ID("params")))
	params := read(t, alice, "params", chromedp.Text(chromedp.ID("params")))
	assert.Contains(t, params, `<script>document.title=\"owned\"</script>`, "the param is shown as text")
	assert.NotEqual(t, "owned", read(t, alice, "title", chromedp.Title()))
	assert.Zero(t, read(t, alice, "scripts", chromedp.Evaluate[int](`document.querySelectorAll("#params script").length`)))
	action := read(t, alice, "action", chromedp.Text(chromedp.ID("action")))
	for _, want := range []string{"agent-7", "human:bob", "delete", "billing.invoices", "production", "db/delete_rows"} {
		assert.Contains(t, action, want)
	}
	assert.Contains(t, read(t, alice, "axes", chromedp.Text(chromedp.ID("axes"))), "irreversible")
	screenshot(t, alice, "ui-hold.png")

	step(t, alice, "approve with a note", chromedp.SendKeys(chromedp.ID("note"), "rows checked with finance"),
		chromedp.Click(chromedp.ID("approve")), chromedp.WaitVisible(chromedp.CSS("#status.approved")))
	assert.Contains(t, read(t, alice, "decided", chromedp.Text(chromedp.ID("decided-by"))), "human:Alice")
	h := p.call(t, "GET", "/v1/holds/"+id, nil)
	assert.Equal(t, "approved", h.str("status"))
	assert.Equal(t, "rows checked with finance", h.str("resolution_reason"))
	edits := map[string]any{"agent.on_behalf_of": "human:bob", "target.ref": "billing.invoices",
		"params.where": "issued_at < '2019-01-01'", "params.comment": hostile}
	assert.Equal(t, "allow", p.decide(t, resubmission(id, edits)).str("decision"), "the re-submission is allowed")
	again := p.decide(t, resubmission(id, edits))
	assert.Equal(t, "deny", again.str("decision"), "once")
	assert.Equal(t, "svc_hold_consumed", again.str("reason"))

	// Reject.
	other := map[string]any{"agent.on_behalf_of": "human:bob", "params.where": "reject me"}
	rejected, _ := raiseHold(t, p, other)
	step(t, alice, "reject", chromedp.Navigate(p.URL+"/ui/holds/"+rejected), chromedp.WaitVisible(chromedp.ID("reject")),
		chromedp.Click(chromedp.ID("reject")), chromedp.WaitVisible(chromedp.CSS("#status.rejected")))
	assert.Equal(t, "rejected", p.call(t, "GET", "/v1/holds/"+rejected, nil).str("status"))
	assert.Equal(t, "svc_hold_not_approved",
		p.decide(t, resubmission(rejected, other)).str("reason"))

	// A form without its CSRF token.
	pending, _ := raiseHold(t, p, map[string]any{"agent.on_behalf_of": "human:bob", "params.where": "csrf"})
	step(t, alice, "approve without the CSRF token", chromedp.Navigate(p.URL+"/ui/holds/"+pending),
		chromedp.WaitVisible(chromedp.ID("approve")),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('#decide input[name="csrf"]').remove()`),
		chromedp.Click(chromedp.ID("approve")), chromedp.WaitVisible(chromedp.ID("problem")))
	assert.Contains(t, read(t, alice, "refusal", chromedp.Text(chromedp.ID("problem"))), "CSRF token is missing")
	assert.Equal(t, "pending", p.call(t, "GET", "/v1/holds/"+pending, nil).str("status"))

	// The agent's own token.
	agent := person(t, b)
	signinAs(t, agent, p.URL, "tok-agent7")
	step(t, agent, "the agent's inbox", chromedp.WaitVisible(chromedp.ID("holds")))
	step(t, agent, "the agent's own hold", chromedp.Navigate(p.URL+"/ui/holds/"+pending), chromedp.WaitVisible(chromedp.ID("why")))
	why := read(t, agent, "why", chromedp.Text(chromedp.ID("why")))
	assert.Contains(t, why, "the requesting agent and the principal it acts for cannot resolve its hold")
	assert.Zero(t, read(t, agent, "buttons", chromedp.Evaluate[int](`document.querySelectorAll("#approve, #reject").length`)))
	assert.Equal(t, "pending", p.call(t, "GET", "/v1/holds/"+pending, nil).str("status"))
}
