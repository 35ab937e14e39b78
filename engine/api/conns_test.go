package api

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLimitListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ln := LimitListener(inner, 2)
	accepted := make(chan net.Conn, 3)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	for range 3 {
		c, err := net.Dial("tcp", inner.Addr().String())
		require.NoError(t, err)
		defer c.Close()
	}
	first, second := <-accepted, <-accepted
	select {
	case <-accepted:
		t.Fatal("a third connection was accepted while two are open")
	case <-time.After(200 * time.Millisecond):
	}
	require.NoError(t, first.Close())
	require.Error(t, first.Close(), "closing twice frees one slot only")
	select {
	case c := <-accepted:
		require.NotNil(t, c)
		require.NoError(t, c.Close())
	case <-time.After(5 * time.Second):
		t.Fatal("the slot freed was not taken")
	}
	require.NoError(t, second.Close())
	require.NoError(t, ln.Close())
	_, open := <-accepted
	assert.False(t, open, "Accept ends when the listener is closed")
}
