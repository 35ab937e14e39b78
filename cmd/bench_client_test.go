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
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const benchAllowBody = `{"decision":"allow","reason":"ok","rule":"svc.policy/default_allow","obligations":[],` +
	`"modulation":null,"decision_id":"0123456789abcdef0123456789abcdef","verb":"read"}` + "\n"

// benchHandler answers POST /v1/decide with status and body, after
// checking the request the raw client wrote.
func benchHandler(t *testing.T, status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(r.Body)
		assert.NoError(t, err)
		assert.Equal(t, "POST /v1/decide", r.Method+" "+r.URL.Path)
		assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
		assert.Equal(t, "Bearer tok", r.Header.Get("Authorization"))
		assert.Equal(t, int64(len(raw)), r.ContentLength)
		assert.Equal(t, "{}", string(raw))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// TestBenchRawClient sends three requests to a real net/http server and
// compares the raw client with the net/http one: same answers, same errors.
func TestBenchRawClient(t *testing.T) {
	closing := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		benchHandler(t, 200, benchAllowBody)(w, r)
	}
	drop := func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if assert.NoError(t, err) {
			_ = conn.Close()
		}
	}
	cases := []struct {
		name     string
		handler  http.HandlerFunc
		verdict  string // "" for an error
		errLike  string // of the raw client
		netHTTP  bool   // net/http agrees on the outcome
		connects int    // connections the raw client opens for 3 requests
	}{
		{"allow", benchHandler(t, 200, benchAllowBody), "allow", "", true, 1},
		{"fail-closed 500", benchHandler(t, 500, `{"decision":"deny","decision_id":"d1","rule":"x"}`), "deny", "", true, 1},
		{"refusal 400", benchHandler(t, 400, `{"decision":"deny","rule":"svc_invalid_request","error":"x"}`), "",
			"answered 400", true, 1},
		{"403 with an id", benchHandler(t, 403, `{"decision":"deny","decision_id":"d1"}`), "", "answered 403", true, 1},
		{"no decision_id", benchHandler(t, 200, `{"decision":"allow"}`), "", "lacks decision or decision_id", true, 1},
		{"empty decision_id", benchHandler(t, 200, `{"decision":"allow","decision_id":""}`), "", "without a decision", true, 1},
		{"not JSON", benchHandler(t, 200, "allow"), "", "not a JSON answer", true, 1},
		{"over the size limit", benchHandler(t, 200, strings.Repeat(" ", maxBenchBody)+benchAllowBody), "",
			"with a body over 1048576 bytes", true, 3},
		{"connection close", closing, "allow", "", true, 3},
		{"dropped", drop, "", "EOF", true, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var conns atomic.Int32
			srv := httptest.NewUnstartedServer(c.handler)
			srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					conns.Add(1)
				}
			}
			srv.Start()
			t.Cleanup(srv.Close)
			p := benchParams{url: srv.URL, token: "tok", concurrency: []int{1}}
			raw, err := newBenchClient(p)
			require.NoError(t, err)
			d := raw.deciders(1)[0]
			for range 3 {
				verdict, err := d.decide(t.Context(), []byte("{}"))
				assert.Equal(t, c.verdict, verdict)
				if c.errLike == "" {
					assert.NoError(t, err)
				} else {
					assert.ErrorContains(t, err, c.errLike)
				}
			}
			require.NoError(t, raw.Close())
			require.NoError(t, raw.Close(), "Close is idempotent")
			assert.Equal(t, int32(c.connects), conns.Load(), "connections opened")

			std := httpDecider{&benchClient{p: p, http: srv.Client()}}
			verdict, err := std.decide(t.Context(), []byte("{}"))
			if c.netHTTP {
				assert.Equal(t, c.verdict, verdict, "net/http client")
				assert.Equal(t, c.verdict == "", err != nil, "net/http client: %v", err)
			}
		})
	}
}

// TestBenchRawChunked reads answers net/http's server sends chunked, as
// the engine's writeJSON, which sets no Content-Length, does for a long
// one: over the 2 KiB the server buffers, or flushed before its end.
func TestBenchRawChunked(t *testing.T) {
	long := map[string]string{"decision": "deny", "decision_id": "d1", "reason": strings.Repeat("long reason ", 400)}
	cases := []struct {
		name    string
		write   func(w http.ResponseWriter)
		verdict string
	}{
		{"over 2 KiB", func(w http.ResponseWriter) { _ = json.NewEncoder(w).Encode(long) }, "deny"},
		{"flushed", func(w http.ResponseWriter) {
			_, _ = io.WriteString(w, benchAllowBody)
			w.(http.Flusher).Flush()
		}, "allow"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var conns atomic.Int32
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/json")
				c.write(w)
			}))
			srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					conns.Add(1)
				}
			}
			srv.Start()
			t.Cleanup(srv.Close)
			target, err := newRawTarget(srv.URL, "")
			require.NoError(t, err)
			conn := newRawConn(target)
			for range 3 {
				verdict, err := conn.decide(t.Context(), []byte("{}"))
				require.NoError(t, err)
				assert.Equal(t, c.verdict, verdict)
			}
			require.NoError(t, conn.Close())
			assert.Equal(t, int32(1), conns.Load(), "one keep-alive connection")

			resp, err := srv.Client().Post(srv.URL+"/v1/decide", "application/json", strings.NewReader("{}"))
			require.NoError(t, err)
			_ = resp.Body.Close()
			assert.Equal(t, []string{"chunked"}, resp.TransferEncoding, "net/http's server sends it chunked")
		})
	}
}

// thenDrop ends a canned reply that drops the connection once written.
const thenDrop = "\x00drop"

// startCannedServer answers each request on loopback with reply(n) for the
// n-th request (from 1), verbatim; "" drops the connection instead, and so
// does a reply ending in thenDrop once written.
func startCannedServer(t testing.TB, reply func(n int64) string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var n atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			wg.Go(func() { serveCanned(conn, &n, reply) })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "http://" + ln.Addr().String()
}

func serveCanned(conn net.Conn, n *atomic.Int64, reply func(int64) string) {
	defer func() { _ = conn.Close() }()
	br := bufio.NewReader(conn)
	for skipRequest(br) == nil {
		out, drop := strings.CutSuffix(reply(n.Add(1)), thenDrop)
		if _, err := io.WriteString(conn, out); err != nil || drop || out == "" {
			return
		}
	}
}

// skipRequest reads a request framed by Content-Length, without the
// allocations of http.ReadRequest, which would blur BenchmarkBenchClient.
func skipRequest(br *bufio.Reader) error {
	length := 0
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		name, value, _ := bytes.Cut(bytes.TrimSpace(line), []byte(":"))
		if len(name) == 0 {
			_, err := br.Discard(length)
			return err
		}
		if bytes.EqualFold(name, []byte("Content-Length")) {
			if length, err = strconv.Atoi(string(bytes.TrimSpace(value))); err != nil {
				return err
			}
		}
	}
}

// cannedReply is a response with the given status line and headers, and a
// Content-Length for body unless headers frame it.
func cannedReply(status, headers, body string) string {
	if !strings.Contains(headers, "Content-Length") && !strings.Contains(headers, "Transfer-Encoding") {
		headers += fmt.Sprintf("Content-Length: %d\r\n", len(body))
	}
	return status + "\r\n" + headers + "\r\n" + body
}

// TestBenchRawFraming feeds the raw client canned responses, some of which
// net/http's server would not write: a good one answers and keeps the
// connection unless the response ends it; a bad one fails its request
// only, and the next request answers on a new connection.
func TestBenchRawFraming(t *testing.T) {
	good := cannedReply("HTTP/1.1 200 OK", "", benchAllowBody)
	chunked := "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
		fmt.Sprintf("10;ext=1\r\n%s\r\n%x\r\n%s\r\n", benchAllowBody[:16], len(benchAllowBody)-16, benchAllowBody[16:]) +
		"0\r\nX-Trailer: t\r\n\r\n"
	cases := []struct {
		name, reply, errLike string
		kept                 bool // the connection carries the next request
	}{
		{"HTTP/1.0", cannedReply("HTTP/1.0 200 OK", "", benchAllowBody), "", false},
		{"lower-case headers", "HTTP/1.1 200 OK\r\ncontent-length: 75\r\nconnection: keep-alive\r\n\r\n" +
			`{"decision":"allow","decision_id":"0123456789abcdef0123456789abcdef","x":1}`, "", true},
		{"no reason phrase", cannedReply("HTTP/1.1 500", "", `{"decision":"deny","decision_id":"d"}`), "", true},
		{"chunked with a trailer", chunked, "", true},
		{"Connection: close", cannedReply("HTTP/1.1 200 OK", "Connection: close\r\n", benchAllowBody), "", false},
		{"body to the end of the connection", "HTTP/1.1 200 OK\r\n\r\n" + benchAllowBody + thenDrop, "", false},
		{"two lengths", cannedReply("HTTP/1.1 200 OK", "Content-Length: 3\r\nContent-Length: 4\r\n", "{}"),
			"multiple Content-Length", false},
		{"signed length", cannedReply("HTTP/1.1 200 OK", "Content-Length: +2\r\n", "{}"), "bad Content-Length", false},
		{"huge length", cannedReply("HTTP/1.1 200 OK", "Content-Length: 99999999\r\n", "{}"), "body over", false},
		{"short body", cannedReply("HTTP/1.1 200 OK", "Content-Length: 500\r\n", benchAllowBody) + thenDrop, "EOF", false},
		{"bad chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "chunk", false},
		{"gzip", cannedReply("HTTP/1.1 200 OK", "Transfer-Encoding: gzip\r\n", ""), "transfer encoding", false},
		{"1xx", "HTTP/1.1 100 Continue\r\n\r\n" + good, "interim status 100", false},
		{"HTTP/2 line", cannedReply("HTTP/2 200 OK", "", benchAllowBody), "malformed HTTP version", false},
		{"garbage", "hello\r\n\r\n", "malformed HTTP response", false},
		{"bytes after the body", good + "HTTP/1.1 200 OK\r\n", "bytes after its body", false},
		{"header without colon", cannedReply("HTTP/1.1 200 OK", "Oops\r\n", benchAllowBody), "malformed MIME header", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			url := startCannedServer(t, func(n int64) string {
				if n == 1 {
					return c.reply
				}
				return good
			})
			target, err := newRawTarget(url, "")
			require.NoError(t, err)
			conn := newRawConn(target)
			defer func() { _ = conn.Close() }()
			verdict, err := conn.decide(t.Context(), []byte("{}"))
			if c.errLike == "" {
				require.NoError(t, err)
				require.NotEmpty(t, verdict)
			} else {
				require.ErrorContains(t, err, c.errLike)
			}
			require.Equal(t, c.kept, conn.conn != nil, "connection kept")
			verdict, err = conn.decide(t.Context(), []byte("{}"))
			require.NoError(t, err)
			require.Equal(t, "allow", verdict)
		})
	}
}

// TestBenchDriveAwaitsInFlight runs workers against a slow server that
// drops every fifth request: every request is an answer or an error, none
// is cut off at the end, and the answers are those the server gave.
func TestBenchDriveAwaitsInFlight(t *testing.T) {
	var answers, drops atomic.Int64
	url := startCannedServer(t, func(n int64) string {
		time.Sleep(5 * time.Millisecond) // a request in flight when the run ends
		if n%5 == 0 {
			drops.Add(1)
			return ""
		}
		answers.Add(1)
		return cannedReply("HTTP/1.1 200 OK", "", benchAllowBody)
	})
	b, err := newBenchClient(benchParams{url: url, concurrency: []int{4}, sessions: 3})
	require.NoError(t, err)
	defer func() { _ = b.Close() }()
	r, err := b.drive(t.Context(), 4, "t", 100*time.Millisecond)
	require.NoError(t, err)
	assert.Positive(t, r.errors)
	assert.Equal(t, answers.Load(), int64(r.answered), "answers given = answers counted")
	assert.Equal(t, drops.Load(), int64(r.errors), "dropped requests = errors")
	assert.Len(t, r.latencies, r.answered)
	assert.Equal(t, r.answered, r.verdicts["allow"])
}

// TestBenchRawCancel ends a request to a server that never answers when
// its context is cancelled.
func TestBenchRawCancel(t *testing.T) {
	block := make(chan struct{})
	url := startCannedServer(t, func(int64) string { <-block; return "" })
	t.Cleanup(func() { close(block) }) // before the server's cleanup, which waits for it
	target, err := newRawTarget(url, "")
	require.NoError(t, err)
	conn := newRawConn(target)
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err = conn.decide(ctx, []byte("{}"))
	require.ErrorIs(t, err, context.Canceled)
	_, err = conn.decide(ctx, []byte("{}"))
	require.ErrorIs(t, err, context.Canceled)
	require.NoError(t, conn.Close())
}

// TestBenchConnsKept checks that runs reuse the connections of the runs
// before, as net/http's pool did: the timed run after a warm-up dials none.
func TestBenchConnsKept(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(benchHandlerAny())
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	b, err := newBenchClient(benchParams{url: srv.URL, concurrency: []int{2, 3}, sessions: 5})
	require.NoError(t, err)
	for _, n := range []int{2, 2, 3, 1} {
		r, err := b.drive(t.Context(), n, "t", 20*time.Millisecond)
		require.NoError(t, err)
		require.Zero(t, r.errors)
	}
	require.NoError(t, b.Close())
	assert.Equal(t, int32(3), conns.Load())
}

// benchHandlerAny answers any request with an allow.
func benchHandlerAny() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, benchAllowBody)
	}
}

// TestBenchNoAnswerSaysWhy runs bench against engines that never answer a
// decision: the error names the status they answered with, and for a 401
// the setting to fix, or else says why no answer came.
func TestBenchNoAnswerSaysWhy(t *testing.T) {
	status := func(code int, body string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			_, _ = io.WriteString(w, body)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	unauthorized := status(401, `{"error":"unauthorized","decision":"deny","rule":"svc.core/unauthorized"}`)
	notFound := status(404, "404 page not found\n")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	cases := []struct {
		name, url, token, want string
	}{
		{"401 without a token", unauthorized, "",
			"bench: the engine at " + unauthorized + " answered 401 Unauthorized: set --token or SVC_CORE_TOKEN to its SVC_AUTH_TOKEN"},
		{"401 with a token", unauthorized, "wrong",
			"answered 401 Unauthorized: the token of --token or SVC_CORE_TOKEN is not its SVC_AUTH_TOKEN"},
		{"404", notFound, "", "bench: the engine at " + notFound + " answered 404 Not Found, and no decision in 20ms ("},
		{"404 body", notFound, "", "errors, the last: decide answered 404: the body is not a JSON answer"},
		{"nothing listening", closed, "", "bench: no decision was answered in 20ms ("},
		{"nothing listening cause", closed, "", "errors, the last: dial engine: dial tcp " + ln.Addr().String()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := benchParams{url: c.url, token: c.token, concurrency: []int{2}, duration: 100 * time.Millisecond, sessions: 3}
			err := runBench(t.Context(), p, io.Discard)
			require.ErrorContains(t, err, c.want)
		})
	}
}

// TestBenchAnswerStatusError: an answer other than 200 or 500 is an error
// that carries its status, so that a run without answers can name it.
func TestBenchAnswerStatusError(t *testing.T) {
	for _, status := range []int{400, 401, 403, 404, 502} {
		_, err := benchAnswer(status, []byte(`{"decision":"deny","decision_id":"d"}`))
		var se *benchStatusError
		require.ErrorAs(t, err, &se, "status %d", status)
		assert.Equal(t, status, se.status)
	}
	for _, status := range []int{200, 500} {
		_, err := benchAnswer(status, []byte(`{"decision":"deny"}`))
		var se *benchStatusError
		require.Error(t, err)
		assert.False(t, errors.As(err, &se), "status %d", status)
	}
}
