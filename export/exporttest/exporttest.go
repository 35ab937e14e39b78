// Package exporttest provides collectors that misbehave on purpose, for the
// back-pressure tests of package export and of svc serve.
package exporttest

import (
	"context"
	"net"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// StuckCollector listens for TCP on loopback, accepts connections and never
// reads from them; a receive buffer of rcvbuf bytes makes the sender's
// socket fill after a few events. It returns the address, and closes the
// listener and the connections when the test ends.
func StuckCollector(t testing.TB, rcvbuf int) string {
	t.Helper()
	return NewStuck(t, rcvbuf).Addr
}

// Stuck is a collector that accepts TCP connections and never reads them.
type Stuck struct {
	Addr string // host:port it listens on

	mu    sync.Mutex
	conns []net.Conn
}

// NewStuck starts a Stuck collector on loopback whose connections have a
// receive buffer of rcvbuf bytes; it is closed when the test ends.
func NewStuck(t testing.TB, rcvbuf int) *Stuck {
	t.Helper()
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &Stuck{Addr: ln.Addr().String()}
	go s.accept(ln)
	t.Cleanup(func() {
		_ = ln.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, c := range s.conns {
			_ = c.Close()
		}
	})
	return s
}

func (s *Stuck) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns = append(s.conns, c)
		s.mu.Unlock()
	}
}

// Accepted is how many connections the collector has accepted.
func (s *Stuck) Accepted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}
