package export

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/svc-dev/svc/engine"
)

// Syslog transport timing. Reconnection after a failed dial or a broken
// connection backs off exponentially from minBackoff to maxBackoff; a
// successful write on a connection that has lived healthyAfter resets it,
// so an endpoint that accepts and soon closes (a balancer without a
// backend) is dialled less and less often.
//
// A collector that accepts but stops reading makes a write time out (a
// stall). Every new connection to it would take in another kernel buffer's
// worth of events that TCP cannot tell svc were ever read, so it is redialled
// only after stallBackoff, doubling with each stall in a row up to
// maxStallBackoff: meanwhile events wait in svc's queue, which drops and
// counts when full. Writes that go on succeeding for stallForgiven after a
// stall, over any connections, end the series.
const (
	appName         = "svc"
	dialTimeout     = 5 * time.Second
	minBackoff      = 100 * time.Millisecond
	maxBackoff      = 10 * time.Second
	stallBackoff    = 10 * time.Second
	maxStallBackoff = 5 * time.Minute
	stallForgiven   = time.Minute
	healthyAfter    = time.Second
	sendAttempts    = 3
	// pendingReadWait bounds reading what a collector sent us, e.g. TLS 1.3
	// session tickets once per connection.
	pendingReadWait = 20 * time.Millisecond
)

// writeTimeout bounds one write to a stream: a collector that takes nothing
// for that long has stalled. A variable so that tests can shorten it.
var writeTimeout = 5 * time.Second

// syslogSink sends events as RFC 5424 messages: one per datagram over UDP,
// octet-counted (RFC 6587 §3.4.1, RFC 5425 §4.3) over TCP and TLS.
type syslogSink struct {
	protocol string
	address  string
	format   string
	facility int
	hostname string
	procID   string
	msgLimit int // room for MSG within SyslogConfig.MaxMessage
	tls      *tls.Config

	conn      net.Conn
	backoff   time.Duration
	connected time.Time // when conn was dialled
	stalls    int       // stalled connections in a row
	okSince   time.Time // first successful write since the last stall
	nextDial  time.Time
	msg       []byte
	frame     []byte
}

// newSyslogSink returns the sink of cfg, which Validate accepted; roots are
// the roots trusted for a TLS collector, as SyslogConfig.validate loaded
// them (nil for the system roots alone).
func newSyslogSink(cfg SyslogConfig, roots *x509.CertPool) (*syslogSink, error) {
	facility, err := ParseFacility(cfg.Facility)
	if err != nil {
		return nil, fmt.Errorf("SVC_SYSLOG_FACILITY: %w", err)
	}
	hostname, err := os.Hostname()
	if err != nil {
		hostname = "" // framed as the NILVALUE
	}
	s := &syslogSink{
		protocol: cfg.Protocol,
		address:  cfg.Address,
		format:   cfg.Format,
		facility: facility,
		hostname: hostname,
		procID:   strconv.Itoa(os.Getpid()),
	}
	s.msgLimit = msgLimit(cfg.MaxMessage, s.hostname, s.procID)
	if cfg.Protocol == ProtocolTLS {
		if s.tls, err = tlsConfig(cfg, roots); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// msgLimit is the room left for MSG in a message of maxMessage octets
// under the longest header a sink with this hostname and PROCID writes:
// the largest PRI (local7, debug), a timestamp and the longest MSGID.
func msgLimit(maxMessage int, hostname, procID string) int {
	longest := appendMessage(nil, header{
		facility: 23, severity: 7, time: time.Unix(0, 0), hostname: hostname,
		appName: appName, procID: procID, msgID: strings.Repeat("x", maxMsgID),
	}, nil)
	return maxMessage - len(longest) - len(" ")
}

// tlsConfig trusts roots, the system roots plus SVC_SYSLOG_TLS_CA (the
// system roots alone when nil), and verifies the collector's name unless
// SVC_SYSLOG_TLS_VERIFY=false opted out.
func tlsConfig(cfg SyslogConfig, roots *x509.CertPool) (*tls.Config, error) {
	host, _, err := net.SplitHostPort(cfg.Address)
	if err != nil {
		return nil, fmt.Errorf("SVC_SYSLOG_ADDRESS: %w", err)
	}
	return &tls.Config{
		ServerName:         host,
		RootCAs:            roots,
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: cfg.TLSInsecureSkipVerify, //nolint:gosec // explicit opt-out: SVC_SYSLOG_TLS_VERIFY=false
	}, nil
}

func (s *syslogSink) deliver(ctx context.Context, ev engine.Event) error {
	e, err := encodeEntry(ev, s.format, s.msgLimit)
	if err != nil {
		return err
	}
	s.msg = appendMessage(s.msg[:0], header{
		facility: s.facility,
		severity: e.severity,
		time:     e.time,
		hostname: s.hostname,
		appName:  appName,
		procID:   s.procID,
		msgID:    e.msgID,
	}, e.msg)
	if s.protocol == ProtocolUDP {
		return s.send(ctx, s.msg)
	}
	s.frame = appendOctetCounted(s.frame[:0], s.msg)
	return s.send(ctx, s.frame)
}

// send writes one frame, reconnecting (with backoff) when the stream is
// down or breaks; a UDP datagram is tried once.
func (s *syslogSink) send(ctx context.Context, frame []byte) error {
	var err error
	for range sendAttempts {
		if s.conn == nil {
			if err = s.connect(ctx); err != nil {
				if ctx.Err() != nil {
					return err
				}
				continue
			}
		}
		if err = s.write(ctx, frame); err == nil {
			s.wrote()
			return nil
		}
		if s.protocol == ProtocolUDP {
			return err
		}
		if errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() == nil {
			s.stalled()
		} else {
			s.disconnect()
		}
	}
	return err
}

// wrote notes a successful write: the backoff is reset once the connection
// has lived healthyAfter, and a series of stalls ends once writes have
// succeeded for stallForgiven since the first success after the last.
func (s *syslogSink) wrote() {
	if time.Since(s.connected) >= healthyAfter {
		s.backoff = 0
	}
	if s.stalls == 0 {
		return
	}
	now := time.Now()
	if s.okSince.IsZero() {
		s.okSince = now
	}
	if now.Sub(s.okSince) >= stallForgiven {
		s.stalls, s.okSince = 0, time.Time{}
	}
}

// stalled drops a connection whose collector stopped reading and puts off
// the next dial by the stall pause; the ordinary backoff is left as it is.
func (s *syslogSink) stalled() {
	s.abandon()
	s.stalls, s.okSince = s.stalls+1, time.Time{}
	s.nextDial = time.Now().Add(stallPause(s.stalls))
}

// stallPause is the wait before dialling again after the n-th stall in a
// row: stallBackoff, doubling, at most maxStallBackoff.
func stallPause(n int) time.Duration {
	b := stallBackoff
	for i := 1; i < n && b < maxStallBackoff; i++ {
		b *= 2
	}
	return min(b, maxStallBackoff)
}

func (s *syslogSink) connect(ctx context.Context) error {
	if err := sleepCtx(ctx, time.Until(s.nextDial)); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	dialer := &net.Dialer{}
	if s.protocol != ProtocolUDP {
		dialer.Control = boundSendBuffer
	}
	var conn net.Conn
	var err error
	switch s.protocol {
	case ProtocolTLS:
		conn, err = (&tls.Dialer{NetDialer: dialer, Config: s.tls}).DialContext(ctx, "tcp", s.address)
	case ProtocolTCP:
		conn, err = dialer.DialContext(ctx, "tcp", s.address)
	default:
		conn, err = dialer.DialContext(ctx, "udp", s.address)
	}
	if err != nil {
		s.scheduleReconnect()
		return fmt.Errorf("connect to syslog %s over %s: %w", s.address, s.protocol, err)
	}
	s.conn, s.connected = conn, time.Now()
	return nil
}

// streamSendBuffer bounds the kernel's send buffer of a TCP or TLS
// connection. Without it a stalled collector lets megabytes of events pile
// up in the kernel, where they are lost uncounted when the connection
// drops; bounded, they wait in svc's queue, which drops and counts.
const streamSendBuffer = 64 << 10

func boundSendBuffer(_, _ string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, streamSendBuffer)
	}); err != nil {
		return err
	}
	return serr
}

// write sends frame on the open connection. A stream the collector has
// closed is detected before writing, so the frame is not lost into a dead
// socket; cancelling ctx aborts a write stuck on a collector that stopped
// reading.
func (s *syslogSink) write(ctx context.Context, frame []byte) error {
	if s.protocol != ProtocolUDP && !s.alive() {
		return errors.New("syslog collector closed the connection")
	}
	conn := s.conn
	stop := context.AfterFunc(ctx, func() { _ = conn.SetWriteDeadline(time.Unix(1, 0)) })
	defer stop()
	if err := conn.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil {
		return fmt.Errorf("set syslog write deadline: %w", err)
	}
	if _, err := conn.Write(frame); err != nil {
		return fmt.Errorf("write to syslog %s: %w", s.address, err)
	}
	return nil
}

// peerState is what a stream's receive side shows before a write.
type peerState int

const (
	peerQuiet peerState = iota // nothing to read: the usual, healthy state
	peerData                   // the collector sent something
	peerGone                   // end of stream or a socket error
)

// alive reports whether the open stream can take a write. A collector never
// sends application data, so end-of-stream means it closed the connection;
// pending bytes (TLS session tickets, a close_notify alert) are consumed to
// find out which.
func (s *syslogSink) alive() bool {
	raw := s.conn
	if tc, ok := raw.(*tls.Conn); ok {
		raw = tc.NetConn()
	}
	switch peek(raw) {
	case peerGone:
		return false
	case peerData:
		return s.consumePending()
	}
	return true
}

func (s *syslogSink) consumePending() bool {
	if err := s.conn.SetReadDeadline(time.Now().Add(pendingReadWait)); err != nil {
		return false
	}
	defer func() { _ = s.conn.SetReadDeadline(time.Time{}) }()
	var buf [512]byte
	_, err := s.conn.Read(buf[:])
	var ne net.Error
	return err == nil || (errors.As(err, &ne) && ne.Timeout())
}

func (s *syslogSink) disconnect() {
	s.abandon()
	s.scheduleReconnect()
}

// abandon closes a broken or stalled connection at once. A TLS connection
// is closed under its TLS layer: a close_notify alert would wait on a full
// send buffer for up to 5 s, holding the worker past the drain timeout.
func (s *syslogSink) abandon() {
	if tc, ok := s.conn.(*tls.Conn); ok {
		_ = tc.NetConn().Close()
	} else if s.conn != nil {
		_ = s.conn.Close()
	}
	s.conn = nil
}

func (s *syslogSink) scheduleReconnect() {
	s.backoff = min(max(2*s.backoff, minBackoff), maxBackoff)
	s.nextDial = time.Now().Add(s.backoff)
}

// closeDrain bounds the wait for the collector to close its side once the
// sink has closed its own (close).
const closeDrain = time.Second

// close ends the connection at shutdown gracefully: its write side first
// (TLS close_notify, TCP FIN), then what the collector still sends — a TLS
// 1.3 session ticket the sink never reads — is read until the collector
// closes, at most closeDrain. Closed with unread data, a socket sends a
// reset instead, on which the collector may discard messages it had
// received but not yet read: the last ones before a shutdown.
func (s *syslogSink) close() {
	if s.conn == nil {
		return
	}
	if cw, ok := s.conn.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
		_ = s.conn.SetReadDeadline(time.Now().Add(closeDrain))
		_, _ = io.Copy(io.Discard, s.conn)
	}
	_ = s.conn.Close()
	s.conn = nil
}
