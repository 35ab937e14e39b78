package cmd

import (
	"bufio"
	"bytes"
	"context"
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
)

// The load generator shares the CPUs of the engine it measures, so for
// http:// it does what wrk does: each worker keeps one keep-alive
// connection, writes a request whose head is formatted once per run, and
// reads the answer with http.ReadResponse from a per-connection buffer,
// without the goroutine hand-offs of net/http's client.

const (
	benchTimeout = time.Minute // of one request, as net/http's client in the https path
	maxBenchBody = 1 << 20     // a decide answer is well under a KiB
)

// rawTarget is what the raw connections of a run share: the address to
// dial and the request head, up to the Content-Length value.
type rawTarget struct {
	addr string
	head []byte
}

// newRawTarget formats the head of POST <base>/v1/decide once.
func newRawTarget(base, token string) (*rawTarget, error) {
	u, err := url.Parse(base + "/v1/decide")
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("bench: %q is not an http:// base URL", redactURL(base))
	}
	if strings.ContainsFunc(token, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return nil, errors.New("bench: the token holds a control character")
	}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	head := "POST " + u.RequestURI() + " HTTP/1.1\r\nHost: " + u.Host + "\r\nContent-Type: application/json\r\n"
	if token != "" {
		head += "Authorization: Bearer " + token + "\r\n"
	}
	head += "Content-Length: "
	return &rawTarget{addr: net.JoinHostPort(u.Hostname(), port), head: []byte(head)}, nil
}

// rawConn is one worker's keep-alive HTTP/1.1 connection to the engine.
// It is not safe for concurrent use. After any failure to send a request or
// frame its response the connection is closed, as its next bytes cannot be
// trusted, and so it is when the response asks for it (Connection: close,
// HTTP/1.0, a body that ends with the connection); the next request
// redials.
type rawConn struct {
	target  *rawTarget
	conn    net.Conn
	br      *bufio.Reader
	unwatch func() bool // stops cutting conn when the dial's ctx ends
	req     []byte
	body    bytes.Buffer
}

func newRawConn(t *rawTarget) *rawConn {
	return &rawConn{target: t, br: bufio.NewReaderSize(nil, 4096)}
}

// connect dials the engine. The connection is cut (its reads and writes
// fail at once) when ctx ends, so a cancelled run does not wait for it.
func (c *rawConn) connect(ctx context.Context) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", c.target.addr)
	if err != nil {
		return fmt.Errorf("dial engine: %w", err)
	}
	c.conn = conn
	c.br.Reset(conn)
	c.unwatch = context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	return nil
}

// Close closes the connection, if any; it is idempotent.
func (c *rawConn) Close() error {
	if c.conn == nil {
		return nil
	}
	c.unwatch()
	err := c.conn.Close()
	c.conn = nil
	return err
}

// decide posts one envelope and returns the verdict, with the semantics of
// benchAnswer.
func (c *rawConn) decide(ctx context.Context, envelope []byte) (string, error) {
	if c.conn == nil {
		if err := c.connect(ctx); err != nil {
			return "", err
		}
	}
	status, body, err := c.roundTrip(ctx, envelope)
	if err != nil && ctx.Err() != nil {
		return "", fmt.Errorf("decide: %w", ctx.Err()) // not the past deadline that cut it
	}
	if err != nil {
		return "", err
	}
	return benchAnswer(status, body)
}

// roundTrip sends the request and reads the whole response. The
// connection is closed after a failure, or when the response ends it.
func (c *rawConn) roundTrip(ctx context.Context, envelope []byte) (status int, body []byte, err error) {
	resp, err := c.send(ctx, envelope)
	if err != nil {
		_ = c.Close()
		return 0, nil, err
	}
	body, err = readBenchBody(resp, &c.body)
	if err == nil {
		err = c.inStep(resp)
	}
	if err != nil || resp.Close {
		_ = c.Close() // first, so that closing the body does not drain the rest of it
	}
	_ = resp.Body.Close()
	return resp.StatusCode, body, err
}

// send writes the request and reads the head of its response.
func (c *rawConn) send(ctx context.Context, envelope []byte) (*http.Response, error) {
	c.req = append(c.req[:0], c.target.head...)
	c.req = strconv.AppendInt(c.req, int64(len(envelope)), 10)
	c.req = append(c.req, "\r\n\r\n"...)
	c.req = append(c.req, envelope...)
	if err := c.conn.SetDeadline(time.Now().Add(benchTimeout)); err != nil {
		return nil, fmt.Errorf("send decide request: %w", err)
	}
	if err := ctx.Err(); err != nil { // the deadline above may have undone the cut
		return nil, err
	}
	if _, err := c.conn.Write(c.req); err != nil {
		return nil, fmt.Errorf("send decide request: %w", err)
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return nil, fmt.Errorf("read decide response: %w", err)
	}
	return resp, nil
}

// inStep checks, once resp's body is read, that the next bytes of the
// connection can be the answer to the next request: resp is no interim
// answer, which no request asks for, and no bytes follow it.
func (c *rawConn) inStep(resp *http.Response) error {
	if resp.StatusCode < 200 {
		return fmt.Errorf("decide response: interim status %d", resp.StatusCode)
	}
	if n := c.br.Buffered(); n > 0 {
		return fmt.Errorf("decide response: %d bytes after its body", n)
	}
	return nil
}

// readBenchBody reads resp's body, of at most maxBenchBody bytes, into buf,
// which is reused from answer to answer, and returns it.
func readBenchBody(resp *http.Response, buf *bytes.Buffer) ([]byte, error) {
	buf.Reset()
	if resp.ContentLength <= maxBenchBody { // -1 when unknown
		if _, err := buf.ReadFrom(io.LimitReader(resp.Body, maxBenchBody+1)); err != nil {
			return nil, fmt.Errorf("read decide response body: %w", err)
		}
	}
	if resp.ContentLength > maxBenchBody || buf.Len() > maxBenchBody {
		return nil, fmt.Errorf("decide answered %d with a body over %d bytes", resp.StatusCode, maxBenchBody)
	}
	return buf.Bytes(), nil
}

// benchStatusError is an answer of the engine with a status other than a
// decision's (200, or 500 for a fail-closed deny), which bench can name.
type benchStatusError struct {
	status int
	err    error
}

// Error is the message of the underlying error, which gives the status.
func (e *benchStatusError) Error() string { return e.err.Error() }

// Unwrap returns the underlying error.
func (e *benchStatusError) Unwrap() error { return e.err }

// benchAnswer judges one decide answer. A 200, or a 500 carrying a
// decision (a fail-closed deny), is an answer; anything else is an error,
// a *benchStatusError for any other status.
// The body must be a JSON object with "decision" and "decision_id" strings.
func benchAnswer(status int, body []byte) (string, error) {
	verdict, err := benchVerdict(status, body)
	if err != nil && status != http.StatusOK && status != http.StatusInternalServerError {
		return "", &benchStatusError{status: status, err: err}
	}
	return verdict, err
}

// benchVerdict is benchAnswer without the status error.
func benchVerdict(status int, body []byte) (string, error) {
	var a struct {
		Decision   *string `json:"decision"`
		DecisionID *string `json:"decision_id"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return "", fmt.Errorf("decide answered %d: the body is not a JSON answer: %w", status, err)
	}
	if a.Decision == nil || a.DecisionID == nil {
		return "", fmt.Errorf("decide answered %d: the body lacks decision or decision_id", status)
	}
	if (status != 200 && status != 500) || *a.DecisionID == "" {
		return "", fmt.Errorf("decide answered %d without a decision", status)
	}
	return *a.Decision, nil
}
