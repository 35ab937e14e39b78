package export

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/stretchr/testify/require"
)

const installHint = "run scripts/install-test-deps (installs rsyslog and rsyslog-openssl)"

// rsyslog is a real rsyslogd started for one test, listening on loopback for
// UDP, TCP and TLS (OpenSSL netstream driver) and writing every message it
// receives as one JSON line of its parsed RFC 5424 properties. It keeps
// rsyslog's default maxMessageSize (8096 octets), as most collectors run.
type rsyslog struct {
	udp, tcp, tls string // host:port of each input
	caFile        string // PEM of the CA that signed the TLS input's cert
	out           string
	stderr        *bytes.Buffer
}

// received is one line rsyslog wrote: the properties it parsed from a message.
type received struct {
	PRI       string `json:"pri"`
	Version   string `json:"version"`
	Timestamp string `json:"timestamp"`
	Hostname  string `json:"hostname"`
	AppName   string `json:"app_name"`
	ProcID    string `json:"procid"`
	MsgID     string `json:"msgid"`
	SD        string `json:"sd"`
	Input     string `json:"input"`
	Msg       string `json:"msg"`
	Raw       string `json:"raw"`
}

var rsyslogConf = template.Must(template.New("conf").Parse(`
global(workDirectory="{{.Dir}}/work")
module(load="imudp")
module(load="imtcp")
template(name="props" type="list") {
  constant(value="{")
  property(outname="pri" name="pri" format="jsonf") constant(value=",")
  property(outname="version" name="protocol-version" format="jsonf") constant(value=",")
  property(outname="timestamp" name="timereported" dateFormat="rfc3339" format="jsonf") constant(value=",")
  property(outname="hostname" name="hostname" format="jsonf") constant(value=",")
  property(outname="app_name" name="app-name" format="jsonf") constant(value=",")
  property(outname="procid" name="procid" format="jsonf") constant(value=",")
  property(outname="msgid" name="msgid" format="jsonf") constant(value=",")
  property(outname="sd" name="structured-data" format="jsonf") constant(value=",")
  property(outname="input" name="inputname" format="jsonf") constant(value=",")
  property(outname="msg" name="msg" format="jsonf") constant(value=",")
  property(outname="raw" name="rawmsg" format="jsonf")
  constant(value="}\n")
}
ruleset(name="svc") { action(type="omfile" file="{{.Out}}" template="props") }
input(type="imudp" name="udp" address="127.0.0.1" port="{{.UDP}}" ruleset="svc")
input(type="imtcp" name="tcp" address="127.0.0.1" port="{{.TCP}}" ruleset="svc")
input(type="imtcp" name="tls" address="127.0.0.1" port="{{.TLS}}" ruleset="svc"
      streamDriver.name="ossl" streamDriver.mode="1" streamDriver.authMode="anon"
      streamDriver.caFile="{{.CA}}" streamDriver.certFile="{{.Cert}}" streamDriver.keyFile="{{.Key}}")
*.* action(type="omfile" file="{{.Dir}}/internal.log")
`))

// startRsyslog runs rsyslogd in the foreground with its own config, work
// directory and pid file in a temp dir, waits until every input delivers,
// and kills it at cleanup. A missing rsyslog fails the test.
func startRsyslog(t *testing.T) *rsyslog {
	t.Helper()
	bin, err := exec.LookPath("rsyslogd")
	if err != nil {
		bin = "/usr/sbin/rsyslogd"
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("rsyslogd not found (%v): %s", err, installHint)
	}
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "work"), 0o700))
	ca, cert, key := writeTestPKI(t, dir)
	r := &rsyslog{caFile: ca, out: filepath.Join(dir, "out.jsonl"), stderr: &bytes.Buffer{}}
	udpPort, tcpPort, tlsPort := freeUDPPort(t), freeTCPPort(t), freeTCPPort(t)
	r.udp, r.tcp, r.tls = "127.0.0.1:"+udpPort, "127.0.0.1:"+tcpPort, "127.0.0.1:"+tlsPort
	conf := filepath.Join(dir, "rsyslog.conf")
	var buf bytes.Buffer
	require.NoError(t, rsyslogConf.Execute(&buf, map[string]string{
		"Dir": dir, "Out": r.out, "UDP": udpPort, "TCP": tcpPort, "TLS": tlsPort,
		"CA": ca, "Cert": cert, "Key": key,
	}))
	require.NoError(t, os.WriteFile(conf, buf.Bytes(), 0o600))
	cmd := exec.Command(bin, "-n", "-f", conf, "-i", filepath.Join(dir, "rsyslogd.pid"))
	cmd.Stdout, cmd.Stderr = r.stderr, r.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start rsyslogd: %v: %s", err, installHint)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	r.waitReady(t)
	return r
}

// waitReady waits until both stream inputs accept connections and a probe
// datagram has made it through the UDP input into the output file.
func (r *rsyslog) waitReady(t *testing.T) {
	t.Helper()
	probe, err := net.Dial("udp", r.udp)
	require.NoError(t, err)
	defer probe.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		_, _ = probe.Write([]byte("<13>1 - - probe - - - ready"))
		if r.accepts(r.tcp) && r.accepts(r.tls) && len(r.lines(t, "probe")) > 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("rsyslogd did not become ready; its output:\n%s\n%s", r.stderr, installHint)
}

func (r *rsyslog) accepts(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// lines returns what rsyslog wrote for messages with the given APP-NAME.
func (r *rsyslog) lines(t *testing.T, app string) []received {
	t.Helper()
	f, err := os.Open(r.out)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	defer f.Close()
	var out []received
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<20)
	for sc.Scan() {
		var rec received
		if json.Unmarshal(sc.Bytes(), &rec) != nil {
			continue // a line still being written
		}
		if rec.AppName == app {
			out = append(out, rec)
		}
	}
	require.NoError(t, sc.Err())
	return out
}

// linesFrom returns the svc messages rsyslog received on input with the
// given facility.
func (r *rsyslog) linesFrom(t *testing.T, input string, facility int) []received {
	t.Helper()
	var got []received
	for _, rec := range r.lines(t, appName) {
		pri, err := strconv.Atoi(rec.PRI)
		require.NoError(t, err)
		if rec.Input == input && pri/8 == facility {
			got = append(got, rec)
		}
	}
	return got
}

// waitLines waits until rsyslog has written n svc messages from input with
// the given facility, and returns them in arrival order.
func (r *rsyslog) waitLines(t *testing.T, input string, facility, n int) []received {
	t.Helper()
	var got []received
	require.Eventuallyf(t, func() bool {
		got = r.linesFrom(t, input, facility)
		return len(got) >= n
	}, 10*time.Second, 20*time.Millisecond, "rsyslog %s input: want %d messages of facility %d", input, n, facility)
	return got
}

func freeTCPPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return portOf(t, l.Addr().String())
}

func freeUDPPort(t *testing.T) string {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	defer c.Close()
	return portOf(t, c.LocalAddr().String())
}

func portOf(t *testing.T, addr string) string {
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	return port
}

// writeTestPKI creates a throwaway CA and a server certificate for
// 127.0.0.1 signed by it, and returns the PEM file paths.
func writeTestPKI(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "svc test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	caCert, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, caCert, &key.PublicKey, caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	caFile, certFile, keyFile = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writePEM(t, caFile, "CERTIFICATE", caDER)
	writePEM(t, certFile, "CERTIFICATE", leafDER)
	writePEM(t, keyFile, "PRIVATE KEY", keyDER)
	return caFile, certFile, keyFile
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
}

// stripBOM removes the RFC 5424 MSG-UTF8 byte order mark.
func stripBOM(s string) (string, bool) {
	return strings.CutPrefix(s, bom)
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

func mustJSON(t *testing.T, v any) map[string]any {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	return m
}

func fmtPRI(facility, severity int) string { return fmt.Sprint(facility*8 + severity) }
