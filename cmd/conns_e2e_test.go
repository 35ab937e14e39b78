package cmd_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// partialRequest opens a connection to p and sends the headers of a POST
// to path declaring a body of 1,000 bytes, and 10 of them.
func partialRequest(t *testing.T, p *engineProc, path, token string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(p.URL, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	auth := ""
	if token != "" {
		auth = "Authorization: Bearer " + token + "\r\n"
	}
	_, err = fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: svc\r\nContent-Type: application/json\r\n%sContent-Length: 1000\r\n\r\n{\"params\":", path, auth)
	require.NoError(t, err)
	return c
}

// answeredAndClosed reads c's answer and reports its status code and
// whether svc then closed the connection, within wait.
func answeredAndClosed(c net.Conn, wait time.Duration) (int, bool) {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	r := bufio.NewReader(c)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return 0, false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	_, err = r.ReadByte()
	return resp.StatusCode, errors.Is(err, io.EOF)
}

// openFiles counts the open descriptors of process pid.
func openFiles(t *testing.T, pid int) int {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	require.NoError(t, err)
	return len(fds)
}

// TestHalfSentBodiesHoldNothing sends 1,100 requests that declare a body and
// send only part of it, without a credential to /v1/decide and to an
// unknown path: each is answered and its connection closed at once, long
// before SVC_READ_TIMEOUT, without svc waiting for the body, and legitimate
// decides keep answering within their deadline meanwhile. A half-sent body
// with a valid credential is cut off at SVC_READ_TIMEOUT.
func TestHalfSentBodiesHoldNothing(t *testing.T) {
	// Every bound below is half of SVC_READ_TIMEOUT or less, so a request
	// that waited for its body would miss it, while a loaded 2-core machine
	// answering 1,100 connections at once still meets it.
	const readTimeout = 20 * time.Second
	env := baseEnv(t)
	env["SVC_AUTH_TOKEN"] = "adapter-token"
	env["SVC_OPA_MODE"] = "server"
	env["SVC_READ_TIMEOUT"] = fmt.Sprint(readTimeout.Seconds())
	p := startEngine(t, env)
	assert.Contains(t, p.Logs(), `"max_connections":1024`)

	const n = 1100
	var wg sync.WaitGroup
	codes, closed := make([]int, n), make([]bool, n)
	for i := range n {
		c := partialRequest(t, p, []string{"/v1/decide", "/nope"}[i%2], "")
		wg.Go(func() { codes[i], closed[i] = answeredAndClosed(c, readTimeout/2) })
	}
	client := &http.Client{Timeout: readTimeout / 2}
	for range 10 {
		req, err := http.NewRequest("POST", p.URL+"/v1/decide", jsonReader(t, envelope(nil)))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer adapter-token")
		resp, err := client.Do(req)
		require.NoError(t, err, "a legitimate decide answers within its deadline")
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode)
	}
	wg.Wait()
	for i := range n {
		require.Equal(t, []int{401, 404}[i%2], codes[i], "request %d answered without its body", i)
		require.True(t, closed[i], "request %d: svc closed the connection at once", i)
	}
	require.Eventually(t, func() bool { return openFiles(t, p.cmd.Process.Pid) < 100 }, 5*time.Second, 50*time.Millisecond,
		"svc holds no descriptor for the refused requests")

	slow := partialRequest(t, p, "/v1/decide", "adapter-token")
	start := time.Now()
	code, ok := answeredAndClosed(slow, 2*readTimeout)
	assert.Equal(t, 408, code, "a body not sent within SVC_READ_TIMEOUT is refused")
	assert.True(t, ok)
	assert.Less(t, time.Since(start), readTimeout+readTimeout/2)
}

// TestConnectionCap holds SVC_MAX_CONNECTIONS connections open: the next
// client waits until one of them closes.
func TestConnectionCap(t *testing.T) {
	env := baseEnv(t)
	env["SVC_MAX_CONNECTIONS"] = "3"
	p := startEngine(t, env)
	assert.Contains(t, p.Logs(), `"max_connections":3`)
	var held []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", strings.TrimPrefix(p.URL, "http://"))
		require.NoError(t, err)
		held = append(held, c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", p.URL+"/healthz", nil)
	require.NoError(t, err)
	_, err = http.DefaultClient.Do(req)
	require.Error(t, err, "a fourth connection waits")

	require.NoError(t, held[0].Close())
	r := p.call(t, "GET", "/healthz", nil)
	assert.Equal(t, 200, r.Status, "a slot freed is taken")
	for _, c := range held[1:] {
		_ = c.Close()
	}
}

// fileLimit is the hard limit on open files, to which svc raises its own.
func fileLimit(t *testing.T) uint64 {
	t.Helper()
	var lim syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim))
	return lim.Max
}

// TestConnectionSettingsValidated checks that SVC_MAX_CONNECTIONS and
// SVC_READ_TIMEOUT are validated at start-up.
func TestConnectionSettingsValidated(t *testing.T) {
	for _, tt := range []struct{ key, value string }{
		{"SVC_MAX_CONNECTIONS", "many"}, {"SVC_MAX_CONNECTIONS", "-1"}, {"SVC_MAX_CONNECTIONS", "100000000"},
		{"SVC_MAX_CONNECTIONS", strconv.FormatUint(fileLimit(t), 10)}, // leaves no descriptor for svc's files
		{"SVC_READ_TIMEOUT", "0"}, {"SVC_READ_TIMEOUT", "soon"},
	} {
		env := baseEnv(t)
		env[tt.key] = tt.value
		code, out := runFailing(t, env)
		assert.Equal(t, 2, code, "%s=%s: %s", tt.key, tt.value, out)
		assert.Contains(t, out, tt.key)
	}
}
