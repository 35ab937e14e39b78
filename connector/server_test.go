package connector

import (
	"bufio"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServerBoundsTheReadOfABody: a caller that sends its headers and part
// of its body, then stalls, is answered (refused: the body is not
// readable) once BodyTimeout has passed, rather than holding the
// connection open.
func TestServerBoundsTheReadOfABody(t *testing.T) {
	src := testTenancy(t)
	counters := &Counters{}
	g := NewGovernor(GovernorConfig{Mode: ModeEnforce, Decider: &fakeDecider{}, Tenancy: src, Ledger: &memLedger{},
		Counters: counters, Log: zerolog.Nop()})
	srv := httptest.NewServer(NewServer(ServerConfig{Token: "k", Tenancy: src, Counters: counters, Log: zerolog.Nop(),
		Governor: g, BodyTimeout: 300 * time.Millisecond}).Handler())
	t.Cleanup(srv.Close)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	_, err = conn.Write([]byte("POST " + GuardrailPath + " HTTP/1.1\r\nHost: x\r\nx-api-key: k\r\nContent-Type: application/json\r\n" +
		"Content-Length: 100\r\n\r\n{\"input_type\":"))
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err, "answered before the client's own deadline")
	defer resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, int64(1), counters.InvalidRequests.Load())
}
