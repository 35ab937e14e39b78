package export

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTLSCARefusesWhatIsNotACertificate: SVC_SYSLOG_TLS_CA is loaded as
// SVC_GATE_INTROSPECTION_CA_BUNDLE is: a PEM block that is not a
// certificate, or a certificate that does not parse, is refused rather
// than skipped, by Validate and by New alike.
func TestTLSCARefusesWhatIsNotACertificate(t *testing.T) {
	dir := t.TempDir()
	caFile, _, keyFile := writeTestPKI(t, dir)
	ca, err := os.ReadFile(caFile)
	require.NoError(t, err)
	key, err := os.ReadFile(keyFile)
	require.NoError(t, err)
	withKey := filepath.Join(dir, "with-key.pem")
	require.NoError(t, os.WriteFile(withKey, append(append([]byte{}, ca...), key...), 0o600))
	badCert := filepath.Join(dir, "bad-cert.pem")
	writePEM(t, badCert, "CERTIFICATE", []byte("not DER"))
	for _, tc := range []struct{ name, file, want string }{
		{"a key beside the certificate", withKey, `SVC_SYSLOG_TLS_CA: PEM block "PRIVATE KEY" in ` + withKey + " is not a CERTIFICATE"},
		{"a certificate that does not parse", badCert, "SVC_SYSLOG_TLS_CA: certificate 1 in " + badCert + ": "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Syslog: SyslogConfig{Enabled: true, Address: "127.0.0.1:6514", Protocol: ProtocolTLS, TLSCA: tc.file}}
			cfg.SetDefaults()
			assert.ErrorContains(t, cfg.Validate(), tc.want)
			_, err := New(cfg, zerolog.Nop())
			assert.ErrorContains(t, err, tc.want)
		})
	}
}
