package opa

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/envelope"
)

const (
	// opaDecisionPath is opaQuery as a path of OPA's REST data API.
	opaDecisionPath = "/v1/data/svc/policy/decision"
	// opaIdleConns is how many keep-alive connections to an OPA server stay
	// open between decisions, sized to the engine's concurrency.
	opaIdleConns = 64
	// opaProbeTimeout bounds one readiness probe of a starting server.
	opaProbeTimeout = time.Second
)

// RESTEvaluator is the engine.Evaluator that queries a running OPA server through
// its REST data API (POST /v1/data/svc/policy/decision) over keep-alive
// connections. Each query is bounded by a timeout; built-in errors are fatal
// (strict-builtin-errors), as with `opa eval --strict-builtin-errors`.
type RESTEvaluator struct {
	endpoint string // the decision document, with its query parameters
	batch    string // the batch document (opaBatchModule), likewise
	health   string // GET /health
	timeout  time.Duration
	client   *http.Client
	bearer   string // the Authorization header's value, or empty (WithBearerToken)
}

var _ engine.Evaluator = (*RESTEvaluator)(nil)

// NewRESTEvaluator returns an evaluator querying the OPA server at baseURL
// (http or https, optionally with a path prefix), each query bounded by
// timeout. Proxy settings of the environment are ignored: the policy server
// is reached directly or not at all.
func NewRESTEvaluator(baseURL string, timeout time.Duration) (*RESTEvaluator, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("opa server address is not an http(s) URL") // not echoed: it may hold a password
	}
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	return newRESTEvaluator(u, &http.Transport{
		DialContext:         d.DialContext,
		MaxIdleConns:        opaIdleConns,
		MaxIdleConnsPerHost: opaIdleConns,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: timeout,
		DisableCompression:  true,
	}, timeout), nil
}

// UseRootCAs makes the evaluator trust the authorities of roots (SVC_CA_FILE)
// rather than the system's when the server's URL is https; nil keeps the
// system's. Call it before the first query.
func (e *RESTEvaluator) UseRootCAs(roots *x509.CertPool) {
	if roots != nil {
		e.client.Transport.(*http.Transport).TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots}
	}
}

// newUnixRESTEvaluator queries an OPA server listening on the unix socket
// sock, each exchange on the caller's goroutine (syncTransport).
func newUnixRESTEvaluator(sock string, timeout time.Duration) *RESTEvaluator {
	d := &net.Dialer{Timeout: timeout}
	dial := func(ctx context.Context) (net.Conn, error) {
		return d.DialContext(ctx, "unix", sock)
	}
	return newRESTEvaluator(&url.URL{Scheme: "http", Host: "opa"},
		newSyncTransport(dial, opaIdleConns, opaMaxOutput), timeout)
}

func newRESTEvaluator(base *url.URL, transport http.RoundTripper, timeout time.Duration) *RESTEvaluator {
	endpoint := *base
	endpoint.Path = strings.TrimSuffix(base.Path, "/") + opaDecisionPath
	endpoint.RawPath = ""
	endpoint.RawQuery = "strict-builtin-errors=true"
	batch := endpoint
	batch.Path = strings.TrimSuffix(base.Path, "/") + opaBatchPath
	health := endpoint
	health.Path = strings.TrimSuffix(base.Path, "/") + "/health"
	health.RawQuery = ""
	return &RESTEvaluator{
		endpoint: endpoint.String(),
		batch:    batch.String(),
		health:   health.String(),
		timeout:  timeout,
		client: &http.Client{
			Transport: transport,
			// A redirect is not a verdict: report it rather than follow it.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
}

// Evaluate asks the server for data.svc.policy.decision on input. It returns
// a nil error only with a valid verdict; an unreachable or slow server, a
// non-200 answer, an undefined decision or a malformed one is an error, which
// the engine turns into deny.
func (e *RESTEvaluator) Evaluate(ctx context.Context, input json.RawMessage) (engine.Verdict, error) {
	raw, err := e.query(ctx, e.endpoint, input)
	if err != nil {
		return engine.Verdict{}, fmt.Errorf("evaluate %s: %w", opaQuery, err)
	}
	v, err := parseRESTVerdict(raw)
	if err != nil {
		return engine.Verdict{}, fmt.Errorf("evaluate %s: %w", opaQuery, err)
	}
	return v, nil
}

// query posts input (a JSON document) as the input of the document at
// endpoint and returns the 200 answer. A non-200 answer is an
// *opaAnswerError.
func (e *RESTEvaluator) query(ctx context.Context, endpoint string, input []byte) ([]byte, error) {
	body := make([]byte, 0, len(input)+len(`{"input":}`))
	body = append(append(append(body, `{"input":`...), input...), '}')
	qctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(qctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build opa server request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	e.authorize(req)
	// The query is a pure evaluation, so the transport may retry it on a
	// fresh connection when the server closed an idle one under it; an
	// empty value marks it idempotent without sending the header.
	req.Header["Idempotency-Key"] = nil
	resp, err := e.client.Do(req)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return nil, fmt.Errorf("opa server query canceled: %w", ctx.Err())
	case qctx.Err() != nil:
		return nil, fmt.Errorf("opa server did not answer within %s: %w", e.timeout, qctx.Err())
	default:
		return nil, fmt.Errorf("query opa server: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, opaMaxOutput+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("read opa server answer: %w", err)
	case len(raw) > opaMaxOutput:
		return nil, fmt.Errorf("opa server answer exceeds %d bytes", opaMaxOutput)
	case resp.StatusCode != http.StatusOK:
		return nil, &opaAnswerError{status: resp.Status, body: opaSnippet(raw)}
	}
	return raw, nil
}

// opaAnswerError is a non-200 answer of an opa server: it evaluated the
// query and refused it (a built-in error under strict-builtin-errors, a
// conflict between rule values) or rejected the request.
type opaAnswerError struct {
	status, body string
}

// Error names the server's status and the start of its answer.
func (e *opaAnswerError) Error() string {
	return fmt.Sprintf("opa server answered %s: %s", e.status, e.body)
}

// evaluateBatch decides each of inputs (policy input documents) through one
// query of opaBatchModule and returns their results in order. An error
// means no input was decided; an input whose decision is undefined or
// invalid has that error as its result.
func (e *RESTEvaluator) evaluateBatch(ctx context.Context, inputs []json.RawMessage) ([]batchResult, error) {
	size := len(`{"inputs":[]}`)
	for _, in := range inputs {
		size += len(in) + 1
	}
	doc := append(make([]byte, 0, size), `{"inputs":[`...)
	for i, in := range inputs {
		if i > 0 {
			doc = append(doc, ',')
		}
		doc = append(doc, in...)
	}
	doc = append(doc, "]}"...)
	raw, err := e.query(ctx, e.batch, doc)
	if err != nil {
		return nil, fmt.Errorf("evaluate %d inputs of %s: %w", len(inputs), opaQuery, err)
	}
	values, err := batchValues(raw, len(inputs))
	if err != nil {
		return nil, fmt.Errorf("evaluate %d inputs of %s: %w", len(inputs), opaQuery, err)
	}
	results := make([]batchResult, len(inputs))
	for i, value := range values {
		if value == nil {
			results[i].err = fmt.Errorf("evaluate %s: %w", opaQuery, errPolicyUndefined)
			continue
		}
		if results[i].verdict, err = verdictOf(value); err != nil {
			results[i].err = fmt.Errorf("evaluate %s: %w", opaQuery, err)
		}
	}
	return results, nil
}

// batchValues reads the answer to a batch query of n inputs,
// {"result": {"0": <decision>, ...}}, and returns the decisions by
// position, nil where undefined. Member names are matched exactly (see
// ExactMembers); members of the result other than the positions 0 to n-1,
// spelled as OPA writes them, are ignored, and a position given twice makes
// the answer malformed.
func batchValues(raw []byte, n int) ([]json.RawMessage, error) {
	var result [1]json.RawMessage
	if err := envelope.ExactMembers(raw, []string{"result"}, result[:]); err != nil {
		return nil, fmt.Errorf("parse opa server batch answer %q: %w", opaSnippet(raw), err)
	}
	if result[0] == nil || string(result[0]) == "null" {
		return nil, fmt.Errorf("batch document: %w", errPolicyUndefined)
	}
	s, err := envelope.ScanObject(result[0])
	if err != nil {
		return nil, fmt.Errorf("parse opa server batch answer %q: result: %w", opaSnippet(raw), err)
	}
	values := make([]json.RawMessage, n)
	for quoted, value, ok := s.Next(); ok; quoted, value, ok = s.Next() {
		key := envelope.MemberName(quoted)
		i, err := strconv.Atoi(string(key))
		if err != nil || i < 0 || i >= n || string(key) != strconv.Itoa(i) {
			continue
		}
		if values[i] != nil {
			return nil, fmt.Errorf("parse opa server batch answer %q: decision %d appears twice", opaSnippet(raw), i)
		}
		values[i] = value
	}
	return values, nil
}

// healthy reports whether the server answers GET /health with 200 within
// timeout.
func (e *RESTEvaluator) healthy(ctx context.Context, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.health, nil)
	if err != nil {
		return false
	}
	e.authorize(req)
	resp, err := e.client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, opaMaxSnippet))
	return resp.StatusCode == http.StatusOK
}

// Check is the start-up probe of a server svc does not manage: it answers,
// has the svc.policy package loaded, and decides a sample input.
func (e *RESTEvaluator) Check(ctx context.Context) error {
	return probe(ctx, e)
}

// WithBearerToken makes e send `Authorization: Bearer <token>` with every
// request, for an OPA server run with --authentication=token (SVC_OPA_TOKEN);
// an empty token sends none. Call it before e is used; it returns e.
func (e *RESTEvaluator) WithBearerToken(token string) *RESTEvaluator {
	e.bearer = ""
	if token != "" {
		e.bearer = "Bearer " + token
	}
	return e
}

// authorize adds the bearer token, if any, to req.
func (e *RESTEvaluator) authorize(req *http.Request) {
	if e.bearer != "" {
		req.Header.Set("Authorization", e.bearer)
	}
}

// Close drops the idle connections to the server.
func (e *RESTEvaluator) Close() error {
	e.client.CloseIdleConnections()
	return nil
}

// probe evaluates the sample input, naming the likely cause of an undefined
// decision.
func probe(ctx context.Context, ev engine.Evaluator) error {
	input, err := json.Marshal(probeInput())
	if err != nil {
		return fmt.Errorf("encode probe input: %w", err)
	}
	if _, err := ev.Evaluate(ctx, input); err != nil {
		if errors.Is(err, errPolicyUndefined) {
			return fmt.Errorf("the opa server does not define %s (is package svc.policy loaded?): %w", opaQuery, err)
		}
		return err
	}
	return nil
}

// parseRESTVerdict extracts the one valid verdict from a data API answer,
// {"result": <decision>}; an answer without a result is undefined. Member
// names are matched exactly (see ExactMembers).
func parseRESTVerdict(raw []byte) (engine.Verdict, error) {
	var result [1]json.RawMessage
	if err := envelope.ExactMembers(raw, []string{"result"}, result[:]); err != nil {
		return engine.Verdict{}, fmt.Errorf("parse opa server answer %q: %w", opaSnippet(raw), err)
	}
	if result[0] == nil {
		return engine.Verdict{}, errPolicyUndefined
	}
	return verdictOf(result[0])
}
