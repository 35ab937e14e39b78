package cmd

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// clientDefaults are the adapter-to-engine settings of spec §5.
var clientDefaults = map[string]any{"core_url": "", "core_token": "", "verify_ssl": "true", "client_timeout": "30"}

// client talks to a running engine at SVC_CORE_URL with SVC_CORE_TOKEN.
type client struct {
	base  *url.URL
	token string
	http  *http.Client
}

func newClient() (*client, error) {
	p := &parser{v: newViper(clientDefaults)}
	raw := p.str("core_url")
	verify := trueUnlessOptedOut(p.str("verify_ssl"))
	timeout := p.seconds("client_timeout", time.Second, time.Hour)
	if err := p.first(); err != nil {
		return nil, err
	}
	u, ok := httpURL(raw)
	if !ok {
		return nil, fmt.Errorf("SVC_CORE_URL: must be the engine's http(s) base URL, got %q", redactURL(raw))
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: !verify} //nolint:gosec // explicit opt-out
	return &client{base: u, token: p.str("core_token"), http: &http.Client{Transport: tr, Timeout: timeout}}, nil
}

// apiError is an engine answer other than 2xx.
type apiError struct {
	status int
	body   map[string]any
}

// Error names the status and the fields of the engine's error body.
func (e *apiError) Error() string {
	parts := []string{fmt.Sprintf("engine answered %d", e.status)}
	for _, k := range []string{"error", "field", "reason", "status", "hold_id"} {
		if v, ok := e.body[k]; ok && v != "" {
			parts = append(parts, fmt.Sprintf("%s=%v", k, v))
		}
	}
	return strings.Join(parts, " ")
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
		e := &apiError{status: resp.StatusCode, body: map[string]any{}}
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
