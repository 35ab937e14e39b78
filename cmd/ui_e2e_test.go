package cmd_test

import (
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// uiClient is a person's browser as far as the web app can tell: a cookie
// jar, no JavaScript, redirects not followed (so that each can be checked).
type uiClient struct {
	t    *testing.T
	base string
	http *http.Client
}

// page is an answer of the web app.
type page struct {
	Status int
	Body   string
	Header http.Header
}

func newUIClient(t *testing.T, p *engineProc) *uiClient {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &uiClient{t: t, base: p.URL, http: &http.Client{Jar: jar, Timeout: time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (c *uiClient) do(req *http.Request) page {
	c.t.Helper()
	resp, err := c.http.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	return page{Status: resp.StatusCode, Body: string(body), Header: resp.Header}
}

func (c *uiClient) get(path string) page {
	c.t.Helper()
	req, err := http.NewRequest("GET", c.base+path, nil)
	require.NoError(c.t, err)
	return c.do(req)
}

func (c *uiClient) post(path string, form url.Values) page {
	c.t.Helper()
	req, err := http.NewRequest("POST", c.base+path, strings.NewReader(form.Encode()))
	require.NoError(c.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return c.do(req)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrfOf is the CSRF token of the (first) form of body.
func csrfOf(t *testing.T, body string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(body)
	require.NotNil(t, m, "no CSRF field in the page:\n%s", body)
	return m[1]
}

// signin signs in with token and returns the answer to the form post.
func (c *uiClient) signin(token string) page {
	c.t.Helper()
	form := c.get("/ui/signin")
	require.Equal(c.t, 200, form.Status)
	return c.post("/ui/signin", url.Values{"csrf": {csrfOf(c.t, form.Body)}, "token": {token}})
}

// uiEngine is a holds engine with the web app (on by default).
func uiEngine(t *testing.T, extra map[string]string) (*engineProc, map[string]string) {
	return holdsEngine(t, extra)
}

func TestUISecurityHeadersAndCookies(t *testing.T) {
	p, _ := uiEngine(t, nil)
	c := newUIClient(t, p)
	for _, path := range []string{"/ui/signin", "/ui/inbox", "/ui/static/app.css", "/ui/nowhere"} {
		r := c.get(path)
		csp := r.Header.Get("Content-Security-Policy")
		assert.Contains(t, csp, "frame-ancestors 'none'", path)
		assert.Contains(t, csp, "script-src 'self'", path)
		assert.NotContains(t, csp, "unsafe-inline", path)
		assert.Equal(t, "no-referrer", r.Header.Get("Referrer-Policy"), path)
		assert.Equal(t, "DENY", r.Header.Get("X-Frame-Options"), path)
		assert.Equal(t, "nosniff", r.Header.Get("X-Content-Type-Options"), path)
	}
	r := c.get("/ui/inbox")
	require.Equal(t, 303, r.Status, "a page needs a session")
	assert.Equal(t, "/ui/signin?next=%2Fui%2Finbox", r.Header.Get("Location"))

	r = c.signin("tok-alice")
	require.Equal(t, 303, r.Status, r.Body)
	assert.Equal(t, "/ui/inbox", r.Header.Get("Location"))
	cookie := r.Header.Get("Set-Cookie")
	for _, attr := range []string{"svc_ui_session=", "HttpOnly", "SameSite=Strict", "Path=/ui/", "Max-Age=28800"} {
		assert.Contains(t, cookie, attr)
	}
	assert.NotContains(t, cookie, "Secure", "plain HTTP: a Secure cookie would never come back")
	assert.NotContains(t, cookie, "tok-alice", "the token stays on the server")
	inbox := c.get("/ui/inbox")
	require.Equal(t, 200, inbox.Status)
	assert.Contains(t, inbox.Body, "human:Alice")
	assert.NotRegexp(t, `<script>[^<]`, inbox.Body, "no inline script")

	forged := newUIClient(t, p)
	u, err := url.Parse(p.URL + "/ui/")
	require.NoError(t, err)
	value := strings.TrimPrefix(strings.SplitN(cookie, ";", 2)[0], "svc_ui_session=")
	parts := strings.Split(value, ".")
	parts[1] = "9999999999" // a later expiry, same signature
	forged.http.Jar.SetCookies(u, []*http.Cookie{{Name: "svc_ui_session", Value: strings.Join(parts, ".")}})
	assert.Equal(t, 303, forged.get("/ui/inbox").Status, "an altered cookie is no session")
}

func TestUISignInRefusals(t *testing.T) {
	p, _ := uiEngine(t, nil)
	c := newUIClient(t, p)
	form := c.get("/ui/signin")
	r := c.post("/ui/signin", url.Values{"token": {"tok-alice"}})
	assert.Equal(t, 403, r.Status, "no CSRF token")
	assert.Contains(t, r.Body, "CSRF token is missing")
	r = c.post("/ui/signin", url.Values{"token": {"tok-alice"}, "csrf": {"forged" + csrfOf(t, form.Body)}})
	assert.Equal(t, 403, r.Status, "wrong CSRF token")

	r = c.signin("adapter-token")
	assert.Equal(t, 403, r.Status, "the operator token is no person")
	assert.Contains(t, r.Body, "operator token")
	assert.Equal(t, 303, c.get("/ui/inbox").Status)

	r = c.signin("tok-nobody")
	assert.Equal(t, 401, r.Status)
	assert.Contains(t, r.Body, "not a resolver token")
	assert.Equal(t, 303, c.get("/ui/inbox").Status)

	// 10 attempts at once, then one per 6 s: the burst is spent by now or
	// within the next few, whatever the machine's speed.
	limited := false
	for range 12 {
		if r = c.signin("tok-nobody"); r.Status == http.StatusTooManyRequests {
			limited = true
			break
		}
		require.Equal(t, 401, r.Status)
	}
	require.True(t, limited, "sign-in attempts are rate limited")
	assert.NotEmpty(t, r.Header.Get("Retry-After"))
	assert.Contains(t, r.Body, "Too many sign-in attempts")
	assert.Equal(t, 429, c.signin("tok-alice").Status, "a right token waits too")
}

func TestUIDecideAHold(t *testing.T) {
	p, env := uiEngine(t, nil)
	hostile := `<img src=x onerror=alert(1)>`
	id, _ := raiseHold(t, p, map[string]any{"agent.id": "agent-7", "agent.on_behalf_of": hostile,
		"params.where": `<script>alert("x")</script>`})
	c := newUIClient(t, p)
	require.Equal(t, 303, c.signin("tok-alice").Status)

	inbox := c.get("/ui/inbox")
	require.Equal(t, 200, inbox.Status)
	assert.Contains(t, inbox.Body, `data-hold="`+id+`"`)
	assert.NotContains(t, inbox.Body, hostile)
	assert.Contains(t, inbox.Body, html.EscapeString(hostile))

	hold := c.get("/ui/holds/" + id)
	require.Equal(t, 200, hold.Status)
	assert.NotContains(t, hold.Body, "<script>alert")
	assert.Contains(t, hold.Body, `&lt;script&gt;alert(\&#34;x\&#34;)&lt;/script&gt;`)
	for _, want := range []string{"svc.policy/irreversible_broad_prod", "irreversible", "broad", "production",
		"db/delete_rows", `id="approve"`, `id="reject"`, "in the last 1h0m0s: 0 deleted"} {
		assert.Contains(t, hold.Body, want)
	}

	r := c.post("/ui/holds/"+id+"/resolve", url.Values{"decision": {"approve"}})
	assert.Equal(t, 403, r.Status, "no CSRF token")
	assert.Contains(t, r.Body, "CSRF token is missing")
	assert.Equal(t, "pending", p.call(t, "GET", "/v1/holds/"+id, nil).str("status"))
	r = c.post("/ui/holds/"+id+"/resolve", url.Values{"decision": {"approve"}, "csrf": {csrfOf(t, hold.Body)},
		"note": {strings.Repeat("n", 1025)}})
	assert.Equal(t, 400, r.Status, "a note over 1024 bytes, refused as the API refuses its reason")
	assert.Contains(t, r.Body, "note: at most 1024 bytes")
	r = c.post("/ui/holds/"+id+"/resolve", url.Values{"decision": {"approve"}, "csrf": {csrfOf(t, hold.Body)},
		"note": {strings.Repeat("n", 20<<10)}})
	assert.Equal(t, 400, r.Status, "a form over 16 KiB")
	assert.Equal(t, "pending", p.call(t, "GET", "/v1/holds/"+id, nil).str("status"))

	woken := make(chan response, 1)
	go func() { woken <- p.call(t, "GET", "/v1/holds/"+id+"?wait=120", nil) }()
	time.Sleep(300 * time.Millisecond) // let the long-poll start (a later start answers at once)
	r = c.post("/ui/holds/"+id+"/resolve", url.Values{"decision": {"approve"}, "note": {" checked <b>rows</b> "},
		"csrf": {csrfOf(t, hold.Body)}})
	require.Equal(t, 303, r.Status, r.Body)
	assert.Equal(t, "/ui/holds/"+id, r.Header.Get("Location"))
	select {
	case w := <-woken:
		assert.Equal(t, "approved", w.str("status"), "the long-poll wakes on a resolution in the web app")
	case <-time.After(90 * time.Second):
		t.Fatal("the long-poll of the hold was not woken by the web app's resolution")
	}
	h := p.call(t, "GET", "/v1/holds/"+id, nil)
	assert.Equal(t, "approved", h.str("status"))
	assert.Equal(t, "checked <b>rows</b>", h.str("resolution_reason"), "the note is the resolution's reason")
	assert.Equal(t, map[string]any{"type": "human", "id": "Alice"}, h.Body["decided_by"])

	done := c.get("/ui/holds/" + id)
	assert.Contains(t, done.Body, "checked &lt;b&gt;rows&lt;/b&gt;")
	assert.Contains(t, done.Body, "human:Alice (verified)")
	assert.NotContains(t, done.Body, `id="approve"`)
	assert.Contains(t, done.Body, "only a pending hold can be resolved")
	again := c.post("/ui/holds/"+id+"/resolve", url.Values{"decision": {"reject"}, "csrf": {csrfOf(t, hold.Body)}})
	assert.Equal(t, 409, again.Status, "409 on a hold no longer pending, as the API")

	history := c.get("/ui/history")
	assert.Contains(t, history.Body, `data-hold="`+id+`"`)
	assert.Contains(t, history.Body, "human:Alice")
	assert.Equal(t, "allow", p.decide(t, resubmission(id, map[string]any{"agent.on_behalf_of": hostile,
		"params.where": `<script>alert("x")</script>`})).str("decision"))

	p.stop(t)
	var note string
	for _, rec := range auditLines(t, env["SVC_AUDIT_LOG"]) {
		if rec["event"] == "hold_resolution" && rec["hold_id"] == id && rec["status"] == "approved" {
			note, _ = rec["reason"].(string)
		}
	}
	assert.Equal(t, "checked <b>rows</b>", note, "the note is audited")
}

func TestUIFourEyesAndPolicySaySo(t *testing.T) {
	p, _ := uiEngine(t, nil)
	id, _ := raiseHold(t, p, map[string]any{"agent.id": "agent-7", "agent.on_behalf_of": "human:bob"})
	for token, why := range map[string]string{
		"tok-agent7": "the requesting agent and the principal it acts for cannot resolve its hold",
		"tok-bob":    "the requesting agent and the principal it acts for cannot resolve its hold",
		"tok-ci":     "principal type automation may not resolve holds of rule svc.policy/irreversible_broad_prod",
	} {
		c := newUIClient(t, p)
		require.Equal(t, 303, c.signin(token).Status, token)
		hold := c.get("/ui/holds/" + id)
		require.Equal(t, 200, hold.Status)
		assert.Contains(t, hold.Body, "You cannot decide this hold: "+why, token)
		assert.NotContains(t, hold.Body, `id="approve"`, token)
		r := c.post("/ui/holds/"+id+"/resolve", url.Values{"decision": {"approve"}, "csrf": {csrfOf(t, hold.Body)}})
		assert.Equal(t, 403, r.Status, token)
		assert.Contains(t, r.Body, why, token)
	}
	assert.Equal(t, "pending", p.call(t, "GET", "/v1/holds/"+id, nil).str("status"))
}

func TestUISessionEndsWhenTheTokenLeavesTheFile(t *testing.T) {
	p, env := uiEngine(t, nil)
	c := newUIClient(t, p)
	require.Equal(t, 303, c.signin("tok-alice").Status)
	require.Equal(t, 200, c.get("/ui/inbox").Status)
	rest := map[string]any{}
	for k, v := range resolverTokens {
		if k != "tok-alice" {
			rest[k] = v
		}
	}
	writeTokens(t, env["SVC_RESOLVER_TOKENS"], rest)
	r := c.get("/ui/inbox")
	require.Equal(t, 303, r.Status)
	assert.Contains(t, r.Header.Get("Location"), "why=revoked")
	writeTokens(t, env["SVC_RESOLVER_TOKENS"], resolverTokens)
	assert.Equal(t, 303, c.get("/ui/inbox").Status, "an ended session stays ended")

	// Sign-out ends the session; it needs its CSRF token.
	require.Equal(t, 303, c.signin("tok-bob").Status)
	inbox := c.get("/ui/inbox")
	assert.Equal(t, 403, c.post("/ui/signout", url.Values{}).Status)
	assert.Equal(t, 303, c.post("/ui/signout", url.Values{"csrf": {csrfOf(t, inbox.Body)}}).Status)
	assert.Equal(t, 303, c.get("/ui/inbox").Status)
}

func TestUIListsFiltersAndPages(t *testing.T) {
	p, _ := uiEngine(t, nil)
	var ids []string
	for i := range 3 {
		id, _ := raiseHold(t, p, map[string]any{"params.where": "batch " + string(rune('a'+i))})
		ids = append(ids, id)
	}
	c := newUIClient(t, p)
	require.Equal(t, 303, c.signin("tok-alice").Status)
	first := c.get("/ui/inbox?limit=2")
	require.Equal(t, 200, first.Status)
	order := regexp.MustCompile(`data-hold="([0-9a-f]+)"`)
	var got []string
	for _, m := range order.FindAllStringSubmatch(first.Body, -1) {
		got = append(got, m[1])
	}
	assert.Equal(t, []string{ids[2], ids[1]}, got, "newest first")
	next := regexp.MustCompile(`id="next" href="([^"]+)"`).FindStringSubmatch(first.Body)
	require.NotNil(t, next, "a next-page link")
	second := c.get(html.UnescapeString(next[1]))
	assert.Contains(t, second.Body, `data-hold="`+ids[0]+`"`)
	assert.NotContains(t, second.Body, `id="next"`)

	bad := c.get("/ui/inbox?cursor=forged")
	assert.Equal(t, 400, bad.Status)
	assert.Contains(t, bad.Body, "cursor: not a cursor issued by this server")
	assert.Equal(t, 400, c.get("/ui/inbox?status=bogus").Status)
	assert.Contains(t, c.get("/ui/history").Body, "No holds here")

	api := p.call(t, "GET", "/v1/holds?order=newest&status=pending&limit=1", nil)
	require.Equal(t, 200, api.Status, "%v", api.Body)
	assert.Equal(t, ids[2], api.Body["items"].([]any)[0].(map[string]any)["id"])
}

func TestUIDisabled(t *testing.T) {
	p, _ := uiEngine(t, map[string]string{"SVC_UI_ENABLED": "false"})
	c := newUIClient(t, p)
	assert.Equal(t, 404, c.get("/ui/signin").Status)
	assert.Equal(t, 404, c.get("/ui/").Status)
	env := baseEnv(t)
	env["SVC_UI_ENABLED"] = "maybe"
	code, out := runFailing(t, env)
	assert.Equal(t, 2, code)
	assert.Contains(t, out, "SVC_UI_ENABLED")
}

func TestUIPublicURLLinks(t *testing.T) {
	sink, hook := newWebhookSink(t, "hook-secret")
	p, _ := uiEngine(t, map[string]string{"SVC_PUBLIC_URL": "https://approvals.example.com/svc/",
		"SVC_WEBHOOK_URL": hook, "SVC_WEBHOOK_SECRET": "hook-secret"})
	id, _ := raiseHold(t, p, nil)
	want := "https://approvals.example.com/svc/ui/holds/" + id
	created := sink.waitWhere(t, "hold.created", func(ev map[string]any) bool { return ev["hold_id"] == id })
	assert.Equal(t, want, created["url"])

	c := newUIClient(t, p)
	r := c.signin("tok-alice")
	assert.Contains(t, r.Header.Get("Set-Cookie"), "Secure", "an https public URL makes the cookies Secure")

	cli := map[string]string{"SVC_CORE_URL": p.URL, "SVC_CORE_TOKEN": "tok-bob",
		"SVC_PUBLIC_URL": "https://approvals.example.com/svc"}
	out := runSvc(t, cli, nil, "holds", "list")
	require.Zero(t, out.code, out.output())
	assert.Contains(t, out.stdout, "PAGE")
	assert.Contains(t, out.stdout, want)
	show := runSvc(t, cli, nil, "holds", "show", id)
	assert.Contains(t, show.stdout, want)
	delete(cli, "SVC_PUBLIC_URL")
	assert.NotContains(t, runSvc(t, cli, nil, "holds", "list").stdout, "PAGE")

	resolved := resolve(t, p, "tok-bob", id, map[string]any{"decision": "reject", "reason": "not today"})
	require.Equal(t, 200, resolved.Status)
	ev := sink.waitWhere(t, "hold.resolved", func(ev map[string]any) bool { return ev["hold_id"] == id })
	assert.Equal(t, "not today", ev["reason"])

	off, _ := uiEngine(t, map[string]string{"SVC_PUBLIC_URL": "https://approvals.example.com",
		"SVC_UI_ENABLED": "false", "SVC_WEBHOOK_URL": hook, "SVC_WEBHOOK_SECRET": "hook-secret"})
	offID, _ := raiseHold(t, off, nil)
	created = sink.waitWhere(t, "hold.created", func(ev map[string]any) bool { return ev["hold_id"] == offID })
	assert.NotContains(t, created, "url", "no page to link to when the web app is off")

	bad := baseEnv(t)
	bad["SVC_PUBLIC_URL"] = "approvals.example.com"
	code, msg := runFailing(t, bad)
	assert.Equal(t, 2, code)
	assert.Contains(t, msg, "SVC_PUBLIC_URL")
}
