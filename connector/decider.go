package connector

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/svc-dev/svc/connector/internal/strictjson"
	"github.com/svc-dev/svc/engine/envelope"
)

// Decider asks the engine. HTTPDecider is the one in production; tests and a
// future in-process mode may provide another.
type Decider interface {
	// Decide posts an envelope to /v1/decide. A Decision is returned for
	// every answer that carries one (200, and the engine's 400 and 500
	// denies); err is set when there is no decision to act on.
	Decide(ctx context.Context, env *envelope.Envelope) (Decision, error)
	// AwaitHold reads a hold, waiting up to wait for it to leave pending.
	AwaitHold(ctx context.Context, holdID string, wait time.Duration) (Hold, error)
}

// Decision is the engine's answer to /v1/decide (docs/api.md).
type Decision struct {
	Decision     string   `json:"decision"`
	Reason       string   `json:"reason"`
	Detail       string   `json:"detail"`
	Rule         string   `json:"rule"`
	Obligations  []string `json:"obligations"`
	DecisionID   string   `json:"decision_id"`
	HoldID       string   `json:"hold_id"`
	EnvelopeHash string   `json:"envelope_hash"`
	Field        string   `json:"field"`
}

// Hold is the part of the engine's hold object the connector reads.
type Hold struct {
	ID        string     `json:"id"`
	Status    string     `json:"status"`
	Rule      string     `json:"rule"`
	DecidedBy *Principal `json:"decided_by"`
	Verified  *bool      `json:"decided_by_verified"`
}

// Hold statuses of the engine.
const (
	HoldPending  = "pending"
	HoldApproved = "approved"
	HoldRejected = "rejected"
	HoldExpired  = "expired"
	HoldConsumed = "consumed"
)

// MaxLongPoll is the longest wait asked of the engine's hold long-poll in
// one request; longer waits are made of several.
const MaxLongPoll = 300 * time.Second

// pollPause spaces hold reads when the engine answers a pending hold before
// the wait asked (an engine without the long-poll).
const pollPause = 250 * time.Millisecond

// maxAnswer bounds an engine answer.
const maxAnswer = 1 << 20

// HTTPDecider talks to the engine at a base URL over keep-alive connections.
type HTTPDecider struct {
	base    *url.URL
	token   string
	timeout time.Duration
	client  *http.Client
}

var _ Decider = (*HTTPDecider)(nil)

// NewHTTPDecider returns a Decider for the engine at base (SVC_CORE_URL),
// sending token (SVC_CORE_TOKEN) as a bearer; verifyTLS false turns
// certificate checks off (SVC_VERIFY_SSL=false). timeout bounds each decide.
func NewHTTPDecider(base *url.URL, token string, verifyTLS bool, timeout time.Duration) *HTTPDecider {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 256
	tr.MaxIdleConnsPerHost = 256
	tr.IdleConnTimeout = 90 * time.Second
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: !verifyTLS} //nolint:gosec // explicit opt-out
	return &HTTPDecider{base: base, token: token, timeout: timeout, client: &http.Client{Transport: tr,
		// A redirect is not a decision: it is refused rather than followed,
		// so that the envelope and the token go to the engine configured.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// UseRootCAs makes the decider trust the authorities of roots (SVC_CA_FILE)
// rather than the system's; nil keeps the system's.
func (d *HTTPDecider) UseRootCAs(roots *x509.CertPool) {
	if roots != nil {
		d.client.Transport.(*http.Transport).TLSClientConfig.RootCAs = roots
	}
}

// Close drops the idle connections.
func (d *HTTPDecider) Close() { d.client.CloseIdleConnections() }

// Decide implements Decider.
func (d *HTTPDecider) Decide(ctx context.Context, env *envelope.Envelope) (Decision, error) {
	body, err := env.MarshalWire()
	if err != nil {
		return Decision{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	status, raw, err := d.do(ctx, http.MethodPost, d.base.JoinPath("v1", "decide"), body)
	if err != nil {
		return Decision{}, err
	}
	var dec Decision
	if err := decodeAnswer(raw, &dec, decisionMembers); err != nil {
		return Decision{}, fmt.Errorf("engine answered %d with a body that is not a decision: %w", status, err)
	}
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return Decision{}, fmt.Errorf("engine refused the connector's credentials (%d); check SVC_CORE_TOKEN", status)
	case status != http.StatusOK && dec.Decision != "deny":
		return Decision{}, fmt.Errorf("engine answered %d without a deny", status)
	case dec.Decision != "allow" && dec.Decision != "deny" && dec.Decision != "require_approval":
		return Decision{}, fmt.Errorf("engine answered an unknown decision %q", dec.Decision)
	case dec.Decision == "require_approval" && dec.HoldID == "":
		return Decision{}, errors.New("engine required approval without a hold id")
	case dec.Decision != "deny" && (dec.DecisionID == "" || dec.Rule == ""):
		// Every allow and hold of the engine is audited under a decision
		// id and names its rule (docs/api.md): one without them cannot be
		// traced to a decision, so it is not acted on.
		return Decision{}, fmt.Errorf("engine answered %s without a decision_id and a rule", dec.Decision)
	}
	return dec, nil
}

// AwaitHold implements Decider through GET /v1/holds/{id}?wait=<seconds>,
// repeated while the hold is pending and time remains.
func (d *HTTPDecider) AwaitHold(ctx context.Context, holdID string, wait time.Duration) (Hold, error) {
	deadline := time.Now().Add(wait)
	for {
		remaining := time.Until(deadline)
		secs := min(remaining, MaxLongPoll) / time.Second
		u := d.base.JoinPath("v1", "holds", holdID)
		if secs > 0 {
			u.RawQuery = "wait=" + strconv.Itoa(int(secs))
		}
		asked := time.Now()
		h, err := d.getHold(ctx, u, secs*time.Second+d.timeout)
		if err != nil || h.Status != HoldPending || time.Until(deadline) <= 0 {
			return h, err
		}
		if time.Since(asked) < secs*time.Second || secs == 0 {
			pause := min(pollPause, time.Until(deadline))
			select {
			case <-ctx.Done():
				return h, nil
			case <-time.After(pause):
			}
		}
	}
}

func (d *HTTPDecider) getHold(ctx context.Context, u *url.URL, timeout time.Duration) (Hold, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	status, raw, err := d.do(ctx, http.MethodGet, u, nil)
	if err != nil {
		return Hold{}, err
	}
	if status != http.StatusOK {
		return Hold{}, fmt.Errorf("engine answered %d to a hold read", status)
	}
	var h Hold
	if err := decodeAnswer(raw, &h, holdMembers); err != nil {
		return Hold{}, fmt.Errorf("engine's hold is not readable: %w", err)
	}
	switch h.Status {
	case HoldPending, HoldApproved, HoldRejected, HoldExpired, HoldConsumed:
		return h, nil
	}
	return Hold{}, fmt.Errorf("engine's hold has an unknown status %q", h.Status)
}

// The members of the engine's answers the connector reads.
var (
	decisionMembers = []string{"decision", "reason", "detail", "rule", "obligations", "decision_id", "hold_id",
		"envelope_hash", "field"}
	holdMembers = []string{"id", "status", "rule", "decided_by", "decided_by_verified"}
)

// decodeAnswer reads an engine answer strictly: no member twice, and no
// member spelled otherwise than the ones read, so that a "Decision" beside
// a "decision" cannot change what the connector sees.
func decodeAnswer(raw []byte, v any, members []string) error {
	return strictjson.DecodeSpelled(raw, v, members...)
}

func (d *HTTPDecider) do(ctx context.Context, method string, u *url.URL, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return 0, nil, fmt.Errorf("build engine request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if d.token != "" {
		req.Header.Set("Authorization", "Bearer "+d.token)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, nil, &UnreachableError{URL: d.base.Redacted(), Err: unwrapURLError(err)}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	switch {
	case err != nil:
		return resp.StatusCode, nil, fmt.Errorf("read engine answer: %w", err)
	case len(raw) > maxAnswer:
		// Cut at the bound, an answer could read as another one (an allow
		// followed by what the cut drops).
		return resp.StatusCode, nil, fmt.Errorf("engine answer longer than %d bytes", maxAnswer)
	}
	return resp.StatusCode, raw, nil
}

// UnreachableError is an engine the connector could not reach, or that
// did not answer in time.
type UnreachableError struct {
	URL string // redacted
	Err error
}

// Error names the engine's URL and the network error: for the log and the
// ledger, which the operator reads.
func (e *UnreachableError) Error() string {
	return fmt.Sprintf("engine unreachable at %s: %v", e.URL, e.Err)
}

// Unwrap returns the network error.
func (e *UnreachableError) Unwrap() error { return e.Err }

// Public says what failed without the engine's address or the network
// details, for a refusal that reaches the gateway's client.
func (e *UnreachableError) Public() string {
	var ne net.Error
	switch {
	case errors.Is(e.Err, context.DeadlineExceeded) || (errors.As(e.Err, &ne) && ne.Timeout()):
		return "engine unreachable (timed out)"
	case errors.Is(e.Err, context.Canceled):
		return "engine unreachable (the request was cancelled)"
	}
	return "engine unreachable (connection failed)"
}

// unwrapURLError drops the *url.Error wrapper, whose message repeats the
// URL (and so any password in it).
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
