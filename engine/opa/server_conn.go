package opa

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// longAgo is a deadline in the past: setting it makes a connection's
// blocked read or write return at once.
var longAgo = time.Unix(1, 0)

// syncTransport is the http.RoundTripper of the supervised OPA server's
// unix socket. It makes each exchange on the caller's goroutine: it writes
// the request, reads the whole answer and puts the connection back among
// the idle ones before returning. net/http's Transport runs two goroutines
// per connection instead, a writer and a reader, so that every query costs
// two goroutine hand-offs, each a thread wake-up on an idle engine.
//
// A query is bounded by its context: its deadline is the connection's, and
// a cancellation makes the blocked read or write return. A request whose
// reused idle connection turns out closed by the server (nothing written,
// or no byte of an answer read) is sent once more on a fresh connection,
// as net/http does for an idempotent request. An answer is read up to
// maxBody bytes; a longer one is cut there and its connection closed, the
// caller seeing more than it accepts.
type syncTransport struct {
	dial    func(ctx context.Context) (net.Conn, error)
	maxIdle int
	maxBody int64

	mu   sync.Mutex
	idle []*syncConn
}

// syncConn is one keep-alive connection to the server.
type syncConn struct {
	conn net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
}

// newSyncTransport returns a transport that dials with dial, keeps up to
// maxIdle idle connections and reads answers of up to maxBody bytes.
func newSyncTransport(dial func(ctx context.Context) (net.Conn, error), maxIdle int, maxBody int64) *syncTransport {
	return &syncTransport{dial: dial, maxIdle: maxIdle, maxBody: maxBody}
}

// RoundTrip sends req and returns its answer, read in full.
func (t *syncTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	body, err := requestBody(req)
	if err != nil {
		return nil, err
	}
	for {
		c, reused, err := t.get(ctx)
		if err != nil {
			return nil, err
		}
		resp, retry, err := t.exchange(ctx, c, req, body, reused)
		if err == nil {
			return resp, nil
		}
		if !retry || ctx.Err() != nil {
			return nil, contextError(ctx, err)
		}
	}
}

// requestBody reads req's body, which the transport may have to send
// twice; it closes the body, as a RoundTripper must.
func requestBody(req *http.Request) ([]byte, error) {
	if req.Body == nil {
		return nil, nil
	}
	defer func() { _ = req.Body.Close() }()
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, fmt.Errorf("read opa server request body: %w", err)
	}
	return body, nil
}

// contextError is ctx's error when ctx has ended, which a connection's
// deadline or cancellation turned into err, so that the caller can tell a
// timeout from a broken exchange; else err. A deadline that has passed is
// awaited, the context's timer being perhaps a little behind the
// connection's.
func contextError(ctx context.Context, err error) error {
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		<-ctx.Done()
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// get returns an idle connection (reused) or a new one.
func (t *syncTransport) get(ctx context.Context) (c *syncConn, reused bool, err error) {
	t.mu.Lock()
	if n := len(t.idle); n > 0 {
		c = t.idle[n-1]
		t.idle = t.idle[:n-1]
		t.mu.Unlock()
		return c, true, nil
	}
	t.mu.Unlock()
	conn, err := t.dial(ctx)
	if err != nil {
		return nil, false, err
	}
	return &syncConn{conn: conn, r: bufio.NewReader(conn), w: bufio.NewWriter(conn)}, false, nil
}

// put keeps c for the next request, or closes it when enough are idle.
func (t *syncTransport) put(c *syncConn) {
	t.mu.Lock()
	if len(t.idle) < t.maxIdle {
		t.idle = append(t.idle, c)
		c = nil
	}
	t.mu.Unlock()
	if c != nil {
		_ = c.conn.Close()
	}
}

// exchange sends req with body on c and reads its answer; c is kept for
// the next request when the answer leaves it usable, else closed. retry
// reports a failure on a reused connection before any byte of an answer
// arrived.
func (t *syncTransport) exchange(ctx context.Context, c *syncConn, req *http.Request, body []byte,
	reused bool) (resp *http.Response, retry bool, err error) {
	deadline, _ := ctx.Deadline() // zero: none
	if err := c.conn.SetDeadline(deadline); err != nil {
		_ = c.conn.Close()
		return nil, reused, err
	}
	stop := context.AfterFunc(ctx, func() { _ = c.conn.SetDeadline(longAgo) })
	resp, answered, err := t.send(c, req, body)
	if !stop() || err != nil || resp.Close {
		// The deadline may have been cut short: the connection is not
		// reused, whatever the outcome.
		_ = c.conn.Close()
		return resp, err != nil && reused && !answered, err
	}
	t.put(c)
	return resp, false, nil
}

// send writes req with body and reads the answer in full; answered reports
// that a byte of it arrived.
func (t *syncTransport) send(c *syncConn, req *http.Request, body []byte) (resp *http.Response, answered bool, err error) {
	out := req.Clone(req.Context())
	out.Body, out.ContentLength = http.NoBody, 0 // a body of unknown length would be probed
	if len(body) > 0 {
		out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	}
	if err := out.Write(c.w); err != nil {
		return nil, false, err
	}
	if err := c.w.Flush(); err != nil {
		return nil, false, err
	}
	if _, err := c.r.Peek(1); err != nil {
		return nil, false, err
	}
	resp, err = http.ReadResponse(c.r, req)
	if err != nil {
		return nil, true, err
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, t.maxBody+1))
	_ = resp.Body.Close()
	if err != nil {
		return nil, true, err
	}
	if int64(len(data)) > t.maxBody {
		resp.Close = true // the rest of the answer is still in the connection
	}
	resp.Body = io.NopCloser(bytes.NewReader(data))
	return resp, true, nil
}

// CloseIdleConnections closes the idle connections (http.Client's
// CloseIdleConnections calls it).
func (t *syncTransport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, c := range idle {
		_ = c.conn.Close()
	}
}
