//go:build linux || darwin

package export

import (
	"errors"
	"net"
	"syscall"
)

// peek reports, without blocking or consuming anything, whether the peer of
// a stream has closed it, sent data, or is quiet.
func peek(conn net.Conn) peerState {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return peerQuiet
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return peerGone
	}
	var buf [1]byte
	state := peerQuiet
	err = raw.Read(func(fd uintptr) bool {
		n, _, rerr := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case errors.Is(rerr, syscall.EAGAIN), errors.Is(rerr, syscall.EWOULDBLOCK), errors.Is(rerr, syscall.EINTR):
			state = peerQuiet
		case rerr != nil || n == 0:
			state = peerGone
		default:
			state = peerData
		}
		return true // never wait for readiness
	})
	if err != nil {
		return peerGone
	}
	return state
}
