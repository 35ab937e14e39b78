package cmd

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/svc-dev/svc/transport"
)

// clientDefaults are the adapter-to-engine settings of spec §5.
var clientDefaults = map[string]any{"core_url": "", "core_token": "", "verify_ssl": "true", "client_timeout": "30",
	"public_url": ""}

// client talks to a running engine at SVC_CORE_URL with SVC_CORE_TOKEN.
type client struct {
	base  *url.URL
	token string
	http  *http.Client
	// public is SVC_PUBLIC_URL, the base of the holds' web pages; ""
	// prints none.
	public string
}

// newClient reads the client settings; a warning about them goes to warn.
func newClient(warn io.Writer) (*client, error) {
	p := &parser{v: newViper(clientDefaults)}
	raw := p.str("core_url")
	verify := p.safetySwitch("verify_ssl")
	timeout := p.seconds("client_timeout", time.Second, time.Hour)
	tlsCfg := p.clientTLS()
	u, ok := httpURL(raw)
	if ok {
		p.serverURL("core_url", u, tlsCfg)
	}
	public := p.publicURL()
	if err := p.first(); err != nil {
		return nil, err
	}
	for _, w := range p.warns {
		fmt.Fprintln(warn, "svc: warning:", w)
	}
	if !ok {
		return nil, fmt.Errorf("SVC_CORE_URL: must be the engine's http(s) base URL, got %q", redactURL(raw))
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{MinVersion: transport.MinVersion, RootCAs: tlsCfg.roots, InsecureSkipVerify: !verify} //nolint:gosec // explicit opt-out
	return &client{base: u, token: p.str("core_token"), http: &http.Client{Transport: tr, Timeout: timeout},
		public: public}, nil
}

// apiError is an engine answer other than 2xx.
type apiError struct {
	status   int
	body     map[string]any
	hasToken bool // SVC_CORE_TOKEN was sent
}

// firstFields are the members of an error body printed first, in this
// order; the others follow in name order, and remedy last, one line each.
var firstFields = []string{"error", "field", "reason", "status", "hold_id", "principal", "rule", "allowed"}

// Error names the status and every member of the engine's error body
// (error, reason, the remedy's actions and the like), and what to do about
// a 401.
func (e *apiError) Error() string {
	parts := []string{fmt.Sprintf("engine answered %d", e.status)}
	seen := map[string]bool{"remedy": true}
	for _, k := range append(slices.Clone(firstFields), slices.Sorted(maps.Keys(e.body))...) {
		v, ok := e.body[k]
		if !ok || seen[k] || v == "" || v == nil {
			continue
		}
		seen[k] = true
		parts = append(parts, k+"="+fieldText(v))
	}
	msg := strings.Join(parts, " ")
	if r, ok := e.body["remedy"].(map[string]any); ok {
		msg += remedyText(r)
	}
	if e.status == http.StatusUnauthorized {
		if e.hasToken {
			msg += "\nthe engine does not accept SVC_CORE_TOKEN: set it to the engine's SVC_AUTH_TOKEN or a token of its SVC_RESOLVER_TOKENS"
		} else {
			msg += "\nSVC_CORE_TOKEN is not set: set it to the engine's SVC_AUTH_TOKEN or a token of its SVC_RESOLVER_TOKENS"
		}
	}
	return msg
}

// fieldText renders a member of an error body: a string as is, anything
// else as JSON.
func fieldText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(raw)
}

// remedyText renders a remedy member ({why, actions, docs}) as lines.
func remedyText(r map[string]any) string {
	var b strings.Builder
	b.WriteString("\nremedy:")
	if why, ok := r["why"].(string); ok && why != "" {
		b.WriteString(" (" + why + ")")
	}
	actions, _ := r["actions"].([]any)
	for _, a := range actions {
		b.WriteString("\n  - " + fieldText(a))
	}
	if docs, ok := r["docs"].(string); ok && docs != "" {
		b.WriteString("\n  see " + docs)
	}
	return b.String()
}

// do sends a request and decodes a JSON answer into out. A non-2xx answer
// is an *apiError whose raw body is also decoded into out when possible.
func (c *client) do(ctx context.Context, method, path string, body []byte, out any) (int, error) {
	u := c.base.JoinPath(strings.TrimPrefix(path, "/"))
	if i := strings.IndexByte(path, '?'); i >= 0 {
		u = c.base.JoinPath(strings.TrimPrefix(path[:i], "/"))
		u.RawQuery = path[i+1:]
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("engine unreachable at %s: %w", c.base.Redacted(), err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("read engine answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		e := &apiError{status: resp.StatusCode, body: map[string]any{}, hasToken: c.token != ""}
		_ = json.Unmarshal(raw, &e.body) // a body that is not JSON leaves only the status
		_ = json.Unmarshal(raw, out)
		return resp.StatusCode, e
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return resp.StatusCode, fmt.Errorf("engine answer is not JSON: %w", err)
	}
	return resp.StatusCode, nil
}

// httpURL parses raw as an absolute http or https URL with a host.
func httpURL(raw string) (*url.URL, bool) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, false
	}
	return u, true
}

// redactURL hides a password in u, for messages. Of a URL that does not
// parse into a host with its user information (a password holding "/"
// ends the host early), everything up to its last "@" is left out, so that
// a password is never echoed.
func redactURL(u string) string {
	if p, err := url.Parse(u); err == nil && p.Host != "" && (p.User != nil || !strings.Contains(u, "@")) {
		return p.Redacted()
	}
	if at := strings.LastIndex(u, "@"); at >= 0 {
		return "…@" + u[at+1:]
	}
	return u
}
