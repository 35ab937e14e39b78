package export

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/export/exporttest"
)

// Publish latency bounds. Publish must never wait on I/O: every wait of the
// worker (backoff from 100ms, dial and write timeouts of 5s) is far above
// maxPublish. The 99th percentile must stay under fastPublish; a single
// slower call is allowed only up to maxPublish, because a loaded test
// machine under -race may deschedule the calling thread for a long while.
const (
	fastPublish = 100 * time.Millisecond
	maxPublish  = time.Second
)

// TestSyslogStuckCollector: a TCP collector that accepts and never reads
// eventually blocks the worker's writes; Publish stays fast, the queue fills,
// drops are counted, and Close still returns within the drain bound.
func TestSyslogStuckCollector(t *testing.T) {
	addr := exporttest.StuckCollector(t, 4096)
	ex := newTestExporter(t, Config{DrainTimeout: 200 * time.Millisecond, Syslog: SyslogConfig{
		Enabled: true, Address: addr, Protocol: ProtocolTCP, QueueSize: 64,
	}})
	ev := engine.Event{Type: engine.EventDecision, Body: fullDecision()}
	published := fillUntilStuck(t, ex, ev)

	before := ex.Stats().Syslog
	require.Positive(t, before.Sent, "frames written before the collector's window closed")
	const burst = 1000
	var lat latencies
	for range burst {
		lat.publish(ex, ev)
	}
	lat.assertFast(t)
	published += burst
	after := ex.Stats().Syslog
	assert.Equal(t, before.Dropped+burst, after.Dropped, "every event of the burst met a full queue")
	assert.Equal(t, before.Sent, after.Sent, "the worker is stuck")
	assert.Equal(t, after.QueueCapacity, after.QueueDepth)

	start := time.Now()
	require.NoError(t, ex.Close())
	assert.Less(t, time.Since(start), 2*time.Second, "Close is bounded by the drain timeout")
	assertAccounted(t, ex.Stats().Syslog, published)
}

// TestSyslogStalledCollectorIsNotRedialledAtOnce: a collector that accepts
// connections but never reads makes writes time out; svc then waits
// (stallBackoff) before dialling it again, so events wait in its queue,
// where drops are counted, instead of filling the kernel buffers of one
// new connection after another, where they would count as sent.
func TestSyslogStalledCollectorIsNotRedialledAtOnce(t *testing.T) {
	defer func(d time.Duration) { writeTimeout = d }(writeTimeout)
	writeTimeout = 150 * time.Millisecond
	stuck := exporttest.NewStuck(t, 4096)
	ex := newTestExporter(t, Config{DrainTimeout: 200 * time.Millisecond, Syslog: SyslogConfig{
		Enabled: true, Address: stuck.Addr, Protocol: ProtocolTCP, QueueSize: 64,
	}})
	ev := engine.Event{Type: engine.EventDecision, Body: fullDecision()}
	var published uint64
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); published++ {
		ex.Publish(ev)
		time.Sleep(2 * time.Millisecond)
	}
	assert.Equal(t, 1, stuck.Accepted(), "the stalled collector was dialled again within the stall backoff")
	assert.Positive(t, ex.Stats().Syslog.Dropped, "events waited in the queue and overflowed it")
	require.NoError(t, ex.Close())
	assertAccounted(t, ex.Stats().Syslog, published)
	assert.Equal(t, 1, stuck.Accepted(), "no dial while draining at shutdown")
}

// TestSyslogStalledTLSCollectorClosesAtOnce: a TLS collector that completes
// the handshake and never reads stalls like a TCP one, and its connection
// is dropped at once (no close_notify waiting on a full buffer), so Close
// keeps to the drain timeout and every event is accounted for.
func TestSyslogStalledTLSCollectorClosesAtOnce(t *testing.T) {
	defer func(d time.Duration) { writeTimeout = d }(writeTimeout)
	writeTimeout = 150 * time.Millisecond
	ca, cert, key := writeTestPKI(t, t.TempDir())
	pair, err := tls.LoadX509KeyPair(cert, key)
	require.NoError(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13})
			_ = tc.Handshake() // then never read
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	ex := newTestExporter(t, Config{DrainTimeout: 200 * time.Millisecond, Syslog: SyslogConfig{
		Enabled: true, Address: l.Addr().String(), Protocol: ProtocolTLS, TLSCA: ca, QueueSize: 64,
	}})
	ev := engine.Event{Type: engine.EventDecision, Body: fullDecision()}
	var published uint64
	// Until the queue overflows: how long the socket buffers take to fill
	// depends on how busy the machine is, not on a fixed time.
	for deadline := time.Now().Add(30 * time.Second); ex.Stats().Syslog.Dropped == 0; published++ {
		require.True(t, time.Now().Before(deadline), "the collector stalled, yet nothing was dropped")
		ex.Publish(ev)
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	require.NoError(t, ex.Close())
	assert.Less(t, time.Since(start), time.Second, "Close keeps to the drain timeout")
	assertAccounted(t, ex.Stats().Syslog, published)
}

// TestSyslogStallBackoffSeries: stalls in a row put the next dial off
// longer and longer, up to maxStallBackoff, without touching the ordinary
// backoff; writes that succeed for stallForgiven end the series; and the
// ordinary backoff is reset only by a write on a connection that has lived
// healthyAfter, so an endpoint that accepts and soon closes is dialled less
// and less often.
func TestSyslogStallBackoffSeries(t *testing.T) {
	assert.Equal(t, []time.Duration{stallBackoff, 2 * stallBackoff, 4 * stallBackoff, maxStallBackoff},
		[]time.Duration{stallPause(1), stallPause(2), stallPause(3), stallPause(20)})
	pause := func(s *syslogSink) time.Duration { return time.Until(s.nextDial).Round(time.Second) }

	s := &syslogSink{}
	s.stalled()
	s.stalled()
	assert.Equal(t, 2*stallBackoff, pause(s))
	s.connected = time.Now().Add(-healthyAfter)
	s.wrote()
	s.disconnect()
	assert.Equal(t, minBackoff, s.backoff, "an ordinary break after a stall is redialled soon")
	s.stalled()
	assert.Equal(t, 4*stallBackoff, pause(s), "the series goes on")
	s.wrote()
	s.okSince = s.okSince.Add(-stallForgiven)
	s.wrote()
	s.stalled()
	assert.Equal(t, stallBackoff, pause(s), "a minute of successful writes ended the series")

	young := &syslogSink{}
	for range 4 { // accepted, written to at once, closed by the peer
		young.connected = time.Now()
		young.wrote()
		young.disconnect()
	}
	assert.Equal(t, 8*minBackoff, young.backoff, "young connections do not reset the backoff")
}

// fillUntilStuck keeps the queue topped up until the worker has made no
// progress for a while with a full queue: it is then blocked writing to a
// collector that does not read. It returns how many events it published.
func fillUntilStuck(t *testing.T, ex *Exporter, ev engine.Event) uint64 {
	t.Helper()
	var published uint64
	var lat latencies
	defer func() { lat.assertFast(t) }()
	lastSent, lastProgress := uint64(0), time.Now()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := ex.Stats().Syslog
		if st.Sent != lastSent || st.QueueDepth < st.QueueCapacity {
			lastSent, lastProgress = st.Sent, time.Now()
		} else if time.Since(lastProgress) > 300*time.Millisecond {
			return published
		}
		require.True(t, time.Now().Before(deadline), "worker never blocked on the stuck collector")
		for range st.QueueCapacity - st.QueueDepth + 1 {
			lat.publish(ex, ev)
			published++
		}
		time.Sleep(time.Millisecond) // pace the refills; progress is polled, not awaited
	}
}

// TestSyslogDownCollector: with nothing listening, Publish stays fast, the
// failures and drops are counted, and every event is accounted for.
func TestSyslogDownCollector(t *testing.T) {
	for _, protocol := range []string{ProtocolTCP, ProtocolTLS, ProtocolUDP} {
		t.Run(protocol, func(t *testing.T) {
			addr := deadAddress(t, protocol)
			ex := newTestExporter(t, Config{DrainTimeout: 300 * time.Millisecond, Syslog: SyslogConfig{
				Enabled: true, Address: addr, Protocol: protocol, QueueSize: 16,
			}})
			ev := engine.Event{Type: engine.EventLifecycle, Body: lifecycleStart()}
			var lat latencies
			const published = 200
			for range published {
				lat.publish(ex, ev)
			}
			lat.assertFast(t)
			require.Eventually(t, func() bool { return ex.Stats().Syslog.Errors > 0 },
				5*time.Second, 10*time.Millisecond, "delivery failures are counted")
			if protocol != ProtocolUDP {
				assert.Positive(t, ex.Stats().Syslog.Dropped, "a worker backing off lets the queue overflow")
			}
			require.NoError(t, ex.Close())
			st := ex.Stats().Syslog
			if protocol != ProtocolUDP {
				assert.Zero(t, st.Sent) // a datagram counts as sent when the socket takes it
			}
			assertAccounted(t, st, published)
		})
	}
}

// TestSyslogReconnects: after the collector drops the connection the next
// event goes out on a new one, and a collector that comes up late is
// reached after the backoff.
func TestSyslogReconnects(t *testing.T) {
	for _, protocol := range []string{ProtocolTCP, ProtocolTLS} {
		t.Run("broken connection/"+protocol, func(t *testing.T) {
			const perConn = 3
			c, ca := startCollector(t, protocol, perConn)
			ex := newTestExporter(t, Config{Syslog: SyslogConfig{Enabled: true, Address: c.addr, Protocol: protocol, TLSCA: ca}})
			for n := 1; n <= perConn; n++ {
				ex.Publish(decisionNumbered(n))
				got := c.next(t)
				assert.Equal(t, 0, got.conn, "one connection carries the stream")
				assert.Contains(t, got.msg, "decision-"+strconv.Itoa(n))
			}
			<-c.closedFirst
			ex.Publish(decisionNumbered(perConn + 1))
			got := c.next(t)
			assert.Equal(t, 1, got.conn, "delivered on a new connection")
			assert.Contains(t, got.msg, "decision-"+strconv.Itoa(perConn+1))
			require.NoError(t, ex.Close())
			assert.Equal(t, uint64(perConn+1), ex.Stats().Syslog.Sent)
		})
	}
	t.Run("collector comes up late", func(t *testing.T) {
		addr := deadAddress(t, ProtocolTCP)
		ex := newTestExporter(t, Config{Syslog: SyslogConfig{Enabled: true, Address: addr, Protocol: ProtocolTCP}})
		ex.Publish(decisionNumbered(1))
		require.Eventually(t, func() bool { return ex.Stats().Syslog.Errors == 1 }, 5*time.Second, 10*time.Millisecond)
		c := startTCPCollectorAt(t, addr, 0, nil)
		ex.Publish(decisionNumbered(2))
		got := c.next(t)
		assert.Contains(t, got.msg, "decision-2")
	})
}

func decisionNumbered(n int) engine.Event {
	d := minimalDecision()
	d.DecisionID = "decision-" + strconv.Itoa(n)
	return engine.Event{Type: engine.EventDecision, Body: d}
}

// latencies records how long Publish calls took.
type latencies []time.Duration

func (l *latencies) publish(ex *Exporter, ev engine.Event) {
	start := time.Now()
	ex.Publish(ev)
	*l = append(*l, time.Since(start))
}

func (l latencies) assertFast(t *testing.T) {
	t.Helper()
	require.NotEmpty(t, l)
	sorted := slices.Sorted(slices.Values(l))
	p99 := sorted[len(sorted)*99/100]
	assert.Less(t, p99, fastPublish, "99th percentile of %d Publish calls", len(l))
	assert.Less(t, sorted[len(sorted)-1], maxPublish, "slowest of %d Publish calls", len(l))
}

// assertAccounted checks that after Close every published event was either
// sent, failed, or dropped, and the queue is empty.
func assertAccounted(t *testing.T, st QueueStats, published uint64) {
	t.Helper()
	assert.Zero(t, st.QueueDepth)
	assert.Equal(t, published, st.Sent+st.Errors+st.Dropped, "sent+errors+dropped of %+v", st)
}

// deadAddress returns a loopback address where nothing listens.
func deadAddress(t *testing.T, protocol string) string {
	t.Helper()
	if protocol == ProtocolUDP {
		return "127.0.0.1:" + freeUDPPort(t)
	}
	return "127.0.0.1:" + freeTCPPort(t)
}

// tcpCollector is a minimal syslog-over-TCP receiver that parses
// octet-counted frames (RFC 6587 §3.4.1) on its own.
type tcpCollector struct {
	addr        string
	frames      chan frameIn
	closedFirst chan struct{}
}

type frameIn struct {
	conn int
	msg  string
}

// startTCPCollector listens on a free port; after closeAfter frames
// (0: never) on the first connection it closes that connection.
func startTCPCollector(t *testing.T, closeAfter int) *tcpCollector {
	return startTCPCollectorAt(t, "127.0.0.1:0", closeAfter, nil)
}

// startCollector starts a TCP or TLS collector; for TLS it also returns the
// CA file that verifies it.
func startCollector(t *testing.T, protocol string, closeAfter int) (*tcpCollector, string) {
	t.Helper()
	if protocol != ProtocolTLS {
		return startTCPCollector(t, closeAfter), ""
	}
	ca, cert, key := writeTestPKI(t, t.TempDir())
	pair, err := tls.LoadX509KeyPair(cert, key)
	require.NoError(t, err)
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13}
	return startTCPCollectorAt(t, "127.0.0.1:0", closeAfter, cfg), ca
}

func startTCPCollectorAt(t *testing.T, addr string, closeAfter int, tlsCfg *tls.Config) *tcpCollector {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	if tlsCfg != nil {
		l = tls.NewListener(l, tlsCfg) // TLS 1.3: the server also sends session tickets
	}
	c := &tcpCollector{addr: l.Addr().String(), frames: make(chan frameIn, 4096), closedFirst: make(chan struct{})}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for n := 0; ; n++ {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			wg.Go(func() { c.read(n, conn, closeAfter) })
		}
	})
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		for _, conn := range conns {
			_ = conn.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return c
}

func (c *tcpCollector) read(n int, conn net.Conn, closeAfter int) {
	defer conn.Close()
	r := bufio.NewReader(conn)
	for count := 1; ; count++ {
		lenText, err := r.ReadString(' ')
		if err != nil {
			return
		}
		size, err := strconv.Atoi(lenText[:len(lenText)-1])
		if err != nil {
			return
		}
		msg := make([]byte, size)
		if _, err := io.ReadFull(r, msg); err != nil {
			return
		}
		c.frames <- frameIn{conn: n, msg: string(msg)}
		if n == 0 && count == closeAfter {
			_ = conn.Close()
			close(c.closedFirst)
			return
		}
	}
}

func (c *tcpCollector) next(t *testing.T) frameIn {
	t.Helper()
	select {
	case f := <-c.frames:
		return f
	case <-time.After(10 * time.Second):
		t.Fatal("collector received nothing")
		return frameIn{}
	}
}
