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
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The load generator shares the CPUs of the engine it measures, so for
// http:// it does what wrk does: each worker keeps one keep-alive
// connection, writes a request whose head is formatted once per run, and
// parses the answer from a per-connection buffer without net/http's
// per-request goroutine hand-offs and allocations.

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
		return nil, fmt.Errorf("bench: %q is not an http:// base URL", base)
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
// trusted, and the next request redials.
type rawConn struct {
	target  *rawTarget
	conn    net.Conn
	br      *bufio.Reader
	unwatch func() bool // stops cutting conn when the dial's ctx ends
	req     []byte
	body    []byte
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
	status, body, keep, err := c.roundTrip(ctx, envelope)
	if err != nil || !keep {
		_ = c.Close()
	}
	if err != nil && ctx.Err() != nil {
		return "", fmt.Errorf("decide: %w", ctx.Err()) // not the past deadline that cut it
	}
	if err != nil {
		return "", err
	}
	return benchAnswer(status, body)
}

// roundTrip writes the request and reads the whole response; keep is
// false when the connection must not carry another request.
func (c *rawConn) roundTrip(ctx context.Context, envelope []byte) (status int, body []byte, keep bool, err error) {
	c.req = append(c.req[:0], c.target.head...)
	c.req = strconv.AppendInt(c.req, int64(len(envelope)), 10)
	c.req = append(c.req, "\r\n\r\n"...)
	c.req = append(c.req, envelope...)
	if err := c.conn.SetDeadline(time.Now().Add(benchTimeout)); err != nil {
		return 0, nil, false, fmt.Errorf("send decide request: %w", err)
	}
	if err := ctx.Err(); err != nil { // the deadline above may have undone the cut
		return 0, nil, false, err
	}
	if _, err := c.conn.Write(c.req); err != nil {
		return 0, nil, false, fmt.Errorf("send decide request: %w", err)
	}
	status, length, keep, err := c.readHead()
	if err != nil {
		return 0, nil, false, err
	}
	if cap(c.body) < length {
		c.body = make([]byte, length)
	}
	c.body = c.body[:length]
	if _, err := io.ReadFull(c.br, c.body); err != nil {
		return 0, nil, false, fmt.Errorf("read decide response body: %w", err)
	}
	if n := c.br.Buffered(); n > 0 {
		return 0, nil, false, fmt.Errorf("decide response: %d bytes after its Content-Length", n)
	}
	return status, c.body, keep, nil
}

// readHead reads the status line and headers of a response framed by
// Content-Length; chunked or unframed responses are errors.
func (c *rawConn) readHead() (status, length int, keep bool, err error) {
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		return 0, 0, false, fmt.Errorf("read decide response: %w", err)
	}
	if status, keep, err = parseStatusLine(line); err != nil {
		return 0, 0, false, err
	}
	length = -1
	for {
		if line, err = c.br.ReadSlice('\n'); err != nil {
			return 0, 0, false, fmt.Errorf("read decide response header: %w", err)
		}
		name, value, ok := bytes.Cut(bytes.TrimRight(line, "\r\n"), []byte(":"))
		if len(name) == 0 && !ok {
			break // the blank line that ends the head
		}
		value = bytes.TrimSpace(value)
		switch {
		case !ok:
			return 0, 0, false, fmt.Errorf("decide response: malformed header line %q", line)
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			return 0, 0, false, fmt.Errorf("decide response: Transfer-Encoding %q is not supported, only Content-Length", value)
		case bytes.EqualFold(name, []byte("Content-Length")):
			n, ok := parseLength(value)
			if !ok || (length >= 0 && n != length) {
				return 0, 0, false, fmt.Errorf("decide response: bad Content-Length %q", value)
			}
			length = n
		case bytes.EqualFold(name, []byte("Connection")) && bytes.Contains(bytes.ToLower(value), []byte("close")):
			keep = false
		}
	}
	if length < 0 {
		return 0, 0, false, fmt.Errorf("decide response: no Content-Length (status %d)", status)
	}
	return status, length, keep, nil
}

// parseStatusLine parses "HTTP/1.x NNN reason"; an HTTP/1.0 answer ends
// the connection. 1xx answers are refused: no request asks for one.
func parseStatusLine(line []byte) (status int, keep bool, err error) {
	l := bytes.TrimRight(line, "\r\n")
	keep = bytes.HasPrefix(l, []byte("HTTP/1.1 "))
	if (keep || bytes.HasPrefix(l, []byte("HTTP/1.0 "))) && len(l) >= 12 && (len(l) == 12 || l[12] == ' ') {
		if n, ok := parseLength(l[9:12]); ok && n >= 200 {
			return n, keep, nil
		}
	}
	return 0, false, fmt.Errorf("decide response: bad status line %q", l)
}

// parseLength parses a non-negative decimal of at most maxBenchBody.
func parseLength(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 7 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n <= maxBenchBody
}

// benchAnswer judges one decide answer. A 200, or a 500 carrying a
// decision (a fail-closed deny), is an answer; anything else is an error.
func benchAnswer(status int, body []byte) (string, error) {
	decision, id, err := decisionFields(body)
	if err != nil {
		return "", fmt.Errorf("decide answered %d: %w", status, err)
	}
	if (status != 200 && status != 500) || id == "" {
		return "", fmt.Errorf("decide answered %d without a decision", status)
	}
	return decision, nil
}

// decisionFields returns the "decision" and "decision_id" members of body,
// which must be a JSON object with both as strings.
func decisionFields(body []byte) (decision, id string, err error) {
	var fields struct {
		Decision   json.RawMessage `json:"decision"`
		DecisionID json.RawMessage `json:"decision_id"`
	}
	if err := json.Unmarshal(body, &fields); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field == "" {
			return "", "", errors.New("the body is not a JSON object")
		}
		return "", "", fmt.Errorf("the body is not JSON: %w", err)
	}
	if fields.Decision == nil || fields.DecisionID == nil {
		return "", "", errors.New("the body lacks decision or decision_id")
	}
	if decision, err = stringField("decision", fields.Decision); err != nil {
		return "", "", err
	}
	if id, err = stringField("decision_id", fields.DecisionID); err != nil {
		return "", "", err
	}
	return decision, id, nil
}

// stringField decodes the member name, raw, as a string.
func stringField(name string, raw json.RawMessage) (string, error) {
	var s string
	if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", fmt.Errorf("%q is not a string", name)
	}
	return s, nil
}
