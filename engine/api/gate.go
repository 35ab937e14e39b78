package api

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"
	"unicode"

	"golang.org/x/sync/singleflight"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/envelope"
)

// Introspector is the Gatekeeper of POST /v1/decide: it accepts
// portal-issued gate credentials by asking the portal's token introspection
// endpoint (RFC 7662).
//
// Introspection contract (copied to docs/auth.md):
//
// Scope. Enabled only when SVC_GATE_INTROSPECTION_URL is set. Only POST
// /v1/decide accepts gate credentials, and only after the SVC_AUTH_TOKEN
// bearer was tried and did not match (that token needs no gate header). Hold
// routes never accept them. The caller sends "Authorization: Bearer
// <credential>" and declares its gate in "X-Svc-Gate: <gate id>".
//
// Request, engine to portal: POST <SVC_GATE_INTROSPECTION_URL> with
// "Content-Type: application/x-www-form-urlencoded", "Accept:
// application/json", body "token=<credential, form-encoded>", and
// "Authorization" from SVC_GATE_INTROSPECTION_AUTH when set. Redirects are
// not followed: a 3xx answer refuses the credential.
//
// Answer, portal to engine. The credential is accepted only when the answer
// has status 200 and a body of at most 64 KiB holding one JSON object in
// which "active" is the JSON boolean true (the string "true" is refused),
// "gate" is a non-empty JSON string of at most 256 bytes without control
// characters (the gate id the credential was issued for; surrounding
// whitespace is trimmed), and
// "exp", when present, is a JSON number of seconds since the epoch that is
// still in the future. Member names match exactly, compared once their
// JSON escapes are decoded; other members (scope, client_id, sub...) are
// ignored. An ambiguous answer is malformed: one that names any member
// twice, or has a member that spells active, gate or exp another way (a
// case variant, surrounding space, full-width or invisible characters).
// Anything else (active false, another status, a malformed or oversized
// body, a TLS failure, an unreachable portal, no answer within
// SVC_GATE_INTROSPECTION_TIMEOUT seconds, default 5.0, at most 60) refuses
// the credential: 401 with "error":"unauthorized".
//
// Order. The credential is introspected first, so a caller without a valid
// credential gets 401 whatever it declares and learns nothing about gates.
// Then a missing or empty X-Svc-Gate gives 403 with "error":"forbidden",
// "reason":"gate_not_declared", and a declared gate that differs from the
// credential's gives 403 with "error":"forbidden","reason":"gate_mismatch",
// and so does a value holding a comma: a list declares more than one gate,
// so it matches none (a gate id with a comma can never be declared). Each
// refusal body also carries "decision":"deny", so a client reading only the
// decision blocks. Gate ids are compared byte for byte after trimming
// surrounding whitespace: case-sensitive, without Unicode normalisation, so
// a portal must issue each id in one canonical spelling.
//
// SVC_GATE_INTROSPECTION_AUTH, the engine's credential toward the portal, is
// either "Bearer <token>" (sent as is; the token is visible ASCII) or "Basic
// <user>:<password>" with user and password in clear text, which the engine
// base64-encodes (RFC 7617). A pre-encoded Basic value has no colon and is
// refused at startup. The scheme word is case-insensitive.
//
// Cache. A positive answer is cached for SVC_GATE_INTROSPECTION_CACHE_SECONDS
// (default 30, at most 86400; 0 asks the portal on every decision, but
// see the shared call below), never past its "exp". Negative answers and
// errors are never cached, so a revocation takes effect within the cache
// window. Entries are keyed by the SHA-256 of the credential, never the
// credential; at most 10,000 are kept, evicting expired entries first, then
// the oldest. Concurrent requests for one uncached credential share one
// portal call, which runs under its own timeout and is not cut short when
// one of the waiting requests goes away. A request that joins a call in
// flight gets its answer, so even with cache 0 an answer may predate the
// request by up to SVC_GATE_INTROSPECTION_TIMEOUT.
//
// Transport. The URL must be https unless its host is loopback (127.0.0.0/8,
// ::1, localhost); plain http may only dial a loopback address. TLS 1.2 or
// later, verified against the system roots plus the PEM certificates of
// SVC_GATE_INTROSPECTION_CA_BUNDLE; verification cannot be turned off.
// HTTPS_PROXY/NO_PROXY are honoured for non-loopback portals.
type Introspector struct {
	// Now is the cache's clock; replace it only before first use.
	Now func() time.Time

	url     string
	auth    string
	ttl     time.Duration
	timeout time.Duration
	client  *http.Client
	cache   *gateCache
	flight  singleflight.Group
	joined  func() // test hook: a caller now waits on a portal call
}

// GateHeader is the request header in which a caller declares its gate.
const GateHeader = "X-Svc-Gate"

// Reasons of a 403 answered to a valid portal-issued credential.
const (
	ReasonGateNotDeclared = "gate_not_declared"
	ReasonGateMismatch    = "gate_mismatch"
)

var _ Gatekeeper = (*Introspector)(nil)

// NewIntrospector validates cfg and builds an Introspector with its own HTTP
// client toward the portal. Close releases its idle connections.
func NewIntrospector(cfg GateConfig) (*Introspector, error) {
	if !cfg.Enabled() {
		return nil, errors.New("SVC_GATE_INTROSPECTION_URL: not set")
	}
	s, err := cfg.parse()
	if err != nil {
		return nil, err
	}
	size := cfg.CacheSize
	if size == 0 {
		size = DefaultGateCacheSize
	}
	return &Introspector{
		Now:     time.Now,
		url:     s.url.String(),
		auth:    s.auth,
		ttl:     time.Duration(cfg.CacheSeconds) * time.Second,
		timeout: cfg.Timeout,
		client:  newGateClient(s, cfg.Timeout),
		cache:   newGateCache(size),
	}, nil
}

func newGateClient(s gateSettings, timeout time.Duration) *http.Client {
	dialer := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	if s.url.Scheme == "http" {
		dialer.Control = loopbackOnly
	}
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         dialer.DialContext,
		TLSClientConfig:     &tls.Config{RootCAs: s.pool, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: timeout,
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        16,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
	}
	return &http.Client{
		Transport: tr,
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// loopbackOnly refuses a plain-http dial to anything but a loopback address,
// whatever "localhost" resolved to.
func loopbackOnly(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("dial %s: %w", address, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("dial %s: plain http introspection is allowed to loopback only", address)
	}
	return nil
}

// Close releases the idle connections to the portal. It is idempotent.
func (g *Introspector) Close() error {
	g.client.CloseIdleConnections()
	return nil
}

// Authenticate introspects credential and checks declaredGate (the
// X-Svc-Gate header value) against the gate it was issued for; a value
// holding a comma is a list of gates and matches none. It returns
// that gate, or an *Error: EUNAUTHORIZED (name "unauthorized") when the
// credential is refused, EFORBIDDEN with Fields {"reason":
// ReasonGateNotDeclared or ReasonGateMismatch} otherwise; the *Error of a
// refusal the portal caused is wrapped in a *PortalError. Messages never
// contain the credential; concurrent callers may share one *Error, so treat
// it as read-only.
func (g *Introspector) Authenticate(ctx context.Context, credential, declaredGate string) (string, error) {
	if credential == "" {
		return "", gateRefused("no credential")
	}
	gate, err := g.introspect(ctx, credential)
	if err != nil {
		return "", err
	}
	switch declared := strings.TrimSpace(declaredGate); {
	case declared == "":
		return "", gateForbidden(ReasonGateNotDeclared, "no "+GateHeader+" header")
	case strings.Contains(declared, ","): // a list: not exactly one gate
		return "", gateForbidden(ReasonGateMismatch, GateHeader+" declares more than one gate")
	case declared != gate:
		return "", gateForbidden(ReasonGateMismatch, GateHeader+" differs from the credential's gate")
	}
	return gate, nil
}

func gateRefused(msg string) *engine.Error {
	return &engine.Error{Code: engine.EUNAUTHORIZED, Name: "unauthorized", Message: "gate credential refused: " + msg}
}

// PortalError is a gate credential refused because of the portal rather
// than the credential: the portal could not be reached or verified, did
// not answer in time, or answered with an error status or an unreadable
// body. It unwraps to the *Error the caller is answered (401), and lets the
// server log an outage as such rather than as a refused credential.
type PortalError struct{ err *engine.Error }

// Error implements error.
func (e *PortalError) Error() string { return e.err.Error() }

// Unwrap returns the refusal answered to the caller.
func (e *PortalError) Unwrap() error { return e.err }

func portalFault(msg string) error { return &PortalError{gateRefused(msg)} }

func gateForbidden(reason, msg string) *engine.Error {
	return &engine.Error{Code: engine.EFORBIDDEN, Message: msg, Fields: map[string]any{"reason": reason}}
}

// introspect answers from the cache or joins the one portal call in flight
// for this credential. The call runs detached from ctx, so a caller that
// goes away refuses only its own request.
func (g *Introspector) introspect(ctx context.Context, credential string) (string, error) {
	sum := sha256.Sum256([]byte(credential))
	key := hex.EncodeToString(sum[:])
	if gate, ok := g.cache.get(key, g.Now()); ok {
		return gate, nil
	}
	detached := context.WithoutCancel(ctx)
	ch := g.flight.DoChan(key, func() (any, error) { return g.fetch(detached, key, credential) })
	if g.joined != nil {
		g.joined()
	}
	select {
	case res := <-ch:
		if res.Err != nil {
			return "", res.Err
		}
		return res.Val.(string), nil
	case <-ctx.Done():
		return "", gateRefused("request ended before the portal answered")
	}
}

// fetch asks the portal under the timeout and caches a positive answer.
func (g *Introspector) fetch(ctx context.Context, key, credential string) (string, error) {
	now := g.Now()
	if gate, ok := g.cache.get(key, now); ok {
		return gate, nil
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	ans, err := g.ask(ctx, credential, now)
	if err != nil {
		return "", err
	}
	if g.ttl > 0 {
		expires := now.Add(g.ttl)
		if !ans.exp.IsZero() && ans.exp.Before(expires) {
			expires = ans.exp
		}
		g.cache.put(key, ans.gate, expires, now)
	}
	return ans.gate, nil
}

type gateAnswer struct {
	gate string
	exp  time.Time // zero when the portal sent none
}

func (g *Introspector) ask(ctx context.Context, credential string, now time.Time) (gateAnswer, error) {
	body := url.Values{"token": {credential}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.url, strings.NewReader(body))
	if err != nil {
		return gateAnswer{}, gateRefused("build introspection request: " + err.Error())
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if g.auth != "" {
		req.Header.Set("Authorization", g.auth)
	}
	resp, err := g.client.Do(req)
	var ne net.Error
	switch {
	case err == nil:
	case errors.As(err, &ne) && ne.Timeout():
		return gateAnswer{}, g.tooLate()
	default:
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is the operator's; keep it out of messages
		}
		return gateAnswer{}, portalFault("portal unreachable: " + err.Error())
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxIntrospectionBody+1))
	switch {
	case ctx.Err() != nil: // an answer racing the deadline is still late
		return gateAnswer{}, g.tooLate()
	case resp.StatusCode != http.StatusOK:
		return gateAnswer{}, portalFault(fmt.Sprintf("portal answered HTTP %d", resp.StatusCode))
	case err != nil:
		return gateAnswer{}, portalFault("read portal answer: " + err.Error())
	case len(data) > maxIntrospectionBody:
		return gateAnswer{}, portalFault("portal answer exceeds 64 KiB")
	}
	return parseGateAnswer(data, now)
}

func (g *Introspector) tooLate() error {
	return portalFault(fmt.Sprintf("portal did not answer within %s", g.timeout))
}

// gateMembers are the members of an introspection answer svc reads.
var gateMembers = [...]string{"active", "gate", "exp"}

// maxGateLen bounds a gate id, in bytes: it is recorded with every decision
// of its credential and exported to the SIEM.
const maxGateLen = 256

// parseGateAnswer reads an introspection answer.
func parseGateAnswer(data []byte, now time.Time) (gateAnswer, error) {
	var members [len(gateMembers)]json.RawMessage
	if err := answerMembers(data, members[:]); err != nil {
		return gateAnswer{}, err
	}
	active, rawGate, rawExp := members[0], members[1], members[2]
	if string(active) != "true" {
		return gateAnswer{}, gateRefused("portal says the credential is not active")
	}
	var gate string
	if err := json.Unmarshal(rawGate, &gate); err != nil {
		return gateAnswer{}, gateRefused("portal answer has no string gate")
	}
	gate = strings.TrimSpace(gate)
	if gate == "" || len(gate) > maxGateLen || strings.IndexFunc(gate, unicode.IsControl) >= 0 {
		return gateAnswer{}, gateRefused("portal answer has an empty, overlong or malformed gate")
	}
	ans := gateAnswer{gate: gate}
	if rawExp != nil {
		var exp float64
		if err := json.Unmarshal(rawExp, &exp); err != nil {
			return gateAnswer{}, gateRefused("portal answer has a non-numeric exp")
		}
		ans.exp = time.Unix(int64(math.Max(0, math.Min(exp, 1<<40))), 0)
		if !ans.exp.After(now) {
			return gateAnswer{}, gateRefused("credential expired")
		}
	}
	return ans, nil
}

// answerMembers checks that doc is one JSON object and sets values[i] to
// the value of its member gateMembers[i], or nil when it has none, with
// ObjectScanner.Match. An answer that names any member twice, or has a
// member that spells one of gateMembers another way ("Active", full-width
// or invisible characters), is refused as a portal fault: JSON readers
// disagree on such a document (encoding/json keeps the last duplicate and
// folds case), so the portal and svc could read different verdicts. The
// fault names only svc's own members: the portal's other names are not ours
// to log.
func answerMembers(doc []byte, values []json.RawMessage) error {
	s, err := envelope.ScanObject(doc)
	if err != nil {
		return portalFault("portal answer is not a JSON object")
	}
	err = s.Match(gateMembers[:], values)
	var f *envelope.MemberFault
	switch {
	case err == nil:
		return nil
	case !errors.As(err, &f):
		return portalFault("portal answer is not a JSON object")
	case f.Twice && f.Name == "":
		return portalFault("portal answer names a member twice")
	case f.Twice:
		return portalFault(fmt.Sprintf("portal answer names member %q twice", f.Name))
	}
	return portalFault(fmt.Sprintf("portal answer spells member %q another way", f.Name))
}
