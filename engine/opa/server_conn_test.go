package opa

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// unixListener listens on a socket in a temporary directory; dial dials it.
func unixListener(t *testing.T) (ln net.Listener, dial func(ctx context.Context) (net.Conn, error)) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	d := &net.Dialer{}
	return ln, func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, "unix", sock) }
}

// serveHTTP serves h on ln and counts the connections it accepts.
func serveHTTP(t *testing.T, ln net.Listener, h http.HandlerFunc) *atomic.Int64 {
	t.Helper()
	var conns atomic.Int64
	srv := &http.Server{Handler: h, ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return &conns
}

func syncClient(tr *syncTransport) *http.Client { return &http.Client{Transport: tr} }

func postBody(t *testing.T, ctx context.Context, c *http.Client, body string) (int, string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://opa/echo", strings.NewReader(body))
	require.NoError(t, err)
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b), nil
}

func TestSyncTransportKeepsOneConnection(t *testing.T) {
	ln, dial := unixListener(t)
	conns := serveHTTP(t, ln, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(append([]byte(r.Method+" "+r.URL.RequestURI()+" "), b...))
	})
	c := syncClient(newSyncTransport(dial, 4, 1<<20))
	defer c.CloseIdleConnections()
	for i := range 5 {
		status, body, err := postBody(t, t.Context(), c, strings.Repeat("x", i))
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, status)
		assert.Equal(t, "POST /echo "+strings.Repeat("x", i), body)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://opa/health", nil)
	require.NoError(t, err)
	resp, err := c.Do(req)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, "GET /health ", string(b))
	assert.Equal(t, int64(1), conns.Load(), "one keep-alive connection for every exchange")
}

// A chunked answer (net/http's for a body it cannot hold whole) is read in
// full.
func TestSyncTransportReadsChunkedAnswer(t *testing.T) {
	ln, dial := unixListener(t)
	serveHTTP(t, ln, func(w http.ResponseWriter, _ *http.Request) {
		for range 10 {
			_, _ = w.Write([]byte(strings.Repeat("a", 1000)))
			w.(http.Flusher).Flush()
		}
	})
	c := syncClient(newSyncTransport(dial, 4, 1<<20))
	defer c.CloseIdleConnections()
	for range 2 {
		_, body, err := postBody(t, t.Context(), c, "{}")
		require.NoError(t, err)
		assert.Equal(t, strings.Repeat("a", 10000), body)
	}
}

// An answer longer than the transport reads is cut one byte past its
// bound, and its connection is not used again.
func TestSyncTransportCutsLongAnswer(t *testing.T) {
	ln, dial := unixListener(t)
	conns := serveHTTP(t, ln, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(strings.Repeat("b", 5000)))
	})
	c := syncClient(newSyncTransport(dial, 4, 100))
	defer c.CloseIdleConnections()
	for range 2 {
		_, body, err := postBody(t, t.Context(), c, "{}")
		require.NoError(t, err)
		assert.Equal(t, strings.Repeat("b", 101), body)
	}
	assert.Equal(t, int64(2), conns.Load())
}

// A server that closes a keep-alive connection after answering (as an idle
// timeout does) costs the next request a fresh connection, not an error.
func TestSyncTransportRetriesOnClosedIdleConnection(t *testing.T) {
	ln, dial := unixListener(t)
	var accepted atomic.Int64
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			req, err := http.ReadRequest(bufio.NewReader(conn))
			if err == nil {
				_, _ = io.Copy(io.Discard, req.Body)
				_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			}
			_ = conn.Close() // without saying so: the client finds out on its next request
		}
	}()
	c := syncClient(newSyncTransport(dial, 4, 1<<20))
	defer c.CloseIdleConnections()
	for range 3 {
		status, body, err := postBody(t, t.Context(), c, "{}")
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, status)
		assert.Equal(t, "ok", body)
	}
	assert.Equal(t, int64(3), accepted.Load())
}

// A server that does not answer holds a request until its context ends,
// then the request fails with the context's error and its connection is
// dropped.
func TestSyncTransportEndsWithContext(t *testing.T) {
	ln, dial := unixListener(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	conns := serveHTTP(t, ln, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("stall") != "" {
			<-release
		}
	})
	c := syncClient(newSyncTransport(dial, 4, 1<<20))
	defer c.CloseIdleConnections()
	ask := func(ctx context.Context, stall bool) error {
		url := "http://opa/"
		if stall {
			url += "?stall=1"
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader("{}"))
		require.NoError(t, err)
		resp, err := c.Do(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		return err
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	err := ask(ctx, true)
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)

	ctx, cancel = context.WithCancel(t.Context())
	time.AfterFunc(100*time.Millisecond, cancel)
	err = ask(ctx, true)
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.Canceled), "%v", err)

	require.NoError(t, ask(t.Context(), false))
	assert.Equal(t, int64(3), conns.Load(), "a connection whose request timed out or was canceled is not reused")
}
