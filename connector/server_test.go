package connector

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
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
// testServer serves a connector over loopback with cfg (token "k"), the
// engine a fakeDecider.
func testServer(t *testing.T, cfg ServerConfig) (*httptest.Server, *Counters) {
	t.Helper()
	src := testTenancy(t)
	counters := &Counters{}
	g := NewGovernor(GovernorConfig{Mode: ModeEnforce, Decider: &fakeDecider{}, Tenancy: src, Ledger: &memLedger{},
		Counters: counters, Log: zerolog.Nop()})
	cfg.Token, cfg.Tenancy, cfg.Counters, cfg.Log, cfg.Governor = "k", src, counters, zerolog.Nop(), g
	srv := httptest.NewServer(NewServer(cfg).Handler())
	t.Cleanup(srv.Close)
	return srv, counters
}

func TestServerBoundsTheReadOfABody(t *testing.T) {
	const timeout = 2 * time.Second
	srv, counters := testServer(t, ServerConfig{BodyTimeout: timeout})
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	// A start that reads as a pre_call request: its lenient second reading
	// must not get a deadline of its own.
	_, err = conn.Write([]byte("POST " + GuardrailPath + " HTTP/1.1\r\nHost: x\r\nx-api-key: k\r\nContent-Type: application/json\r\n" +
		"Content-Length: 100\r\n\r\n{\"input_type\": \"request\", "))
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err, "answered before the client's own deadline")
	defer resp.Body.Close()
	assert.Less(t, time.Since(start), 2*timeout, "one deadline for the whole body, not one per reading")
	body, _ := io.ReadAll(resp.Body)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(body), "BLOCKED")
	assert.NotContains(t, string(body), "127.0.0.1", "the connector's socket addresses stay in its log")
	assert.True(t, resp.Close)
	assert.Equal(t, int64(1), counters.InvalidRequests.Load())
}

// A pre_call body past MaxBodySize is read on, up to MaxPreCall more, to
// tell whether it is one: what follows the object within that window
// refuses it, and so does a body that goes on past the window, since what
// lies beyond is unread.
func TestServerReadsALongPreCallToItsEnd(t *testing.T) {
	srv, _ := testServer(t, ServerConfig{MaxBodySize: 1 << 10, MaxPreCall: 4 << 10})
	object := func(size int) string {
		head := `{"input_type": "request", "pad": "`
		return head + strings.Repeat("x", size-len(head)-2) + `"}`
	}
	after := `{"input_type": "response", "tool_calls": [{"id": "c", "function": {"name": "drop_db", "arguments": "{}"}}]}`
	cases := []struct {
		name, body, want string
	}{
		{"past MaxBodySize", object(3 << 10), "NONE"},
		{"a response after it", object(3<<10) + after, "BLOCKED"},
		{"ending where the window ends, a response after it", object((1<<10)+1+(4<<10)+1) + after, "BLOCKED"},
		{"past the window", object(6 << 10), "BLOCKED"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, srv.URL+GuardrailPath, strings.NewReader(tc.body))
			require.NoError(t, err)
			req.Header.Set("x-api-key", "k")
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			got, _ := io.ReadAll(resp.Body)
			assert.Contains(t, string(got), `"action":"`+tc.want+`"`)
		})
	}
}

// A member spelled like one the connector reads but in another case is
// refused naming it, wherever it is: encoding/json would take it for the
// member (the last of the two would win), while the gateway, which matches
// names exactly, acts on the other. Fixture 01 with its tool renamed to a
// destructive one, each spelling added beside the real member.
func TestServerRefusesMembersSpelledInAnotherCase(t *testing.T) {
	srv, counters := testServer(t, ServerConfig{})
	raw, err := os.ReadFile("../../shared/fixtures/litellm/requests/01_post_call_single_read_tool_call.json")
	require.NoError(t, err)
	body := strings.Replace(string(raw), "crm_get_customer", "db_drop_table", 1)
	cases := []struct{ old, new, field string }{
		{`"model":`, `"TOOL_CALLS": [], "model":`, "TOOL_CALLS"},
		{`"input_type": "response"`, `"input_type": "response", "Input_Type": "request"`, "Input_Type"},
		{`"name": "db_drop_table"`, `"name": "db_drop_table", "Name": "crm_get_customer"`, "tool_calls[0].function.Name"},
		{`"user_api_key_alias":`, `"USER_API_KEY_ALIAS": "agent-lab", "user_api_key_alias":`, "request_data.USER_API_KEY_ALIAS"},
	}
	for i, tc := range cases {
		require.Contains(t, body, tc.old)
		req, err := http.NewRequest(http.MethodPost, srv.URL+GuardrailPath, strings.NewReader(strings.Replace(body, tc.old, tc.new, 1)))
		require.NoError(t, err)
		req.Header.Set("x-api-key", "k")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Contains(t, string(answer), `"action":"BLOCKED"`, tc.field)
		assert.Contains(t, string(answer), `svc.core/invalid_request`, tc.field)
		assert.Contains(t, string(answer), tc.field+": member names are spelled exactly", tc.field)
		assert.Equal(t, int64(i+1), counters.InvalidRequests.Load())
	}
}
