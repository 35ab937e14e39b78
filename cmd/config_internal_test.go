package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/viper"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTrueUnlessOptedOut(t *testing.T) {
	tests := map[string]bool{
		"": true, "true": true, "1": true, "yes": true, "on": true, "maybe": true, "fals": true, "nope": true,
		"false": false, "FALSE": false, " False ": false, "0": false, "no": false, "NO": false, "off": false, "Off": false,
	}
	for in, want := range tests {
		require.Equal(t, want, trueUnlessOptedOut(in), "trueUnlessOptedOut(%q)", in)
	}
}

// TestLoadConfigPolicyDirWithOPAURL: SVC_POLICY_DIR must name a directory,
// except with SVC_OPA_URL, whose server has its own pack and which uses
// neither SVC_POLICY_DIR nor SVC_OPA_BIN.
func TestLoadConfigPolicyDirWithOPAURL(t *testing.T) {
	tests := []struct {
		name    string
		set     map[string]string
		wantErr string // "" = valid
	}{
		{name: "missing policy dir", set: map[string]string{"policy_dir": "/nonexistent/policy"},
			wantErr: `SVC_POLICY_DIR: must be an existing directory, got "/nonexistent/policy"`},
		{name: "a file as policy dir", set: map[string]string{"policy_dir": "config.go"},
			wantErr: "SVC_POLICY_DIR: must be an existing directory"},
		{name: "existing policy dir", set: map[string]string{"policy_dir": t.TempDir()}},
		{name: "missing policy dir with opa url", set: map[string]string{"policy_dir": "/nonexistent/policy",
			"opa_url": "http://127.0.0.1:8181"}},
		{name: "empty opa bin with opa url", set: map[string]string{"opa_bin": " ", "opa_url": "http://127.0.0.1:8181"}},
		{name: "empty opa bin", set: map[string]string{"opa_bin": " "}, wantErr: "SVC_OPA_BIN: must name the opa binary"},
		{name: "bad opa url", set: map[string]string{"policy_dir": "/nonexistent/policy", "opa_url": "opa:8181"},
			wantErr: `SVC_OPA_URL: must be an http(s) URL of an OPA server, got "opa:8181"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadConfig(testViper(tt.set))
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

// TestLoadConfigReportsExportProblemsTogether: every problem of the export
// settings is reported, with the first problem of the other settings; of
// those only the first is.
func TestLoadConfigReportsExportProblemsTogether(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.txt")
	require.NoError(t, os.WriteFile(notPEM, []byte("not a certificate"), 0o600))
	tests := []struct {
		name     string
		set      map[string]string
		want     []string // each reported once
		excluded []string
	}{
		{name: "queue size that is not a number, and syslog",
			set: map[string]string{"webhook_queue_size": "lots", "syslog_protocol": "relp", "syslog_enabled": "true",
				"syslog_tls_ca": "/nonexistent/ca.pem"},
			want: []string{`SVC_WEBHOOK_QUEUE_SIZE: must be an integer from 1 to 100000, got "lots"`,
				`SVC_SYSLOG_PROTOCOL: must be udp, tcp or tls, got "relp"`,
				"SVC_SYSLOG_ADDRESS: required when SVC_SYSLOG_ENABLED is true",
				"SVC_SYSLOG_TLS_CA: open /nonexistent/ca.pem"}},
		{name: "parse errors of every kind",
			set: map[string]string{"syslog_enabled": "maybe", "syslog_tls_verify": "perhaps", "syslog_max_message": "1024",
				"webhook_queue_size": "-5", "syslog_tls_ca": notPEM},
			want: []string{`SVC_SYSLOG_ENABLED: must be true or false, got "maybe"`,
				`SVC_SYSLOG_TLS_VERIFY: must be true or false, got "perhaps"`,
				`SVC_SYSLOG_MAX_MESSAGE: must be an integer from 2048 to 65507, got "1024"`,
				`SVC_WEBHOOK_QUEUE_SIZE: must be an integer from 1 to 100000, got "-5"`,
				"SVC_SYSLOG_TLS_CA: no PEM certificate in " + notPEM}},
		{name: "zero queue size is refused, not defaulted", set: map[string]string{"webhook_queue_size": "0"},
			want: []string{`SVC_WEBHOOK_QUEUE_SIZE: must be an integer from 1 to 100000, got "0"`}},
		{name: "first other problem and every export problem",
			set: map[string]string{"port": "eighty", "log_level": "loud", "syslog_format": "leef", "webhook_url": "ftp://h/x"},
			want: []string{`SVC_PORT: must be an integer from 0 to 65535, got "eighty"`,
				`SVC_SYSLOG_FORMAT: must be json or cef, got "leef"`,
				`SVC_WEBHOOK_URL: scheme must be http or https, got "ftp"`},
			excluded: []string{"SVC_LOG_LEVEL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadConfig(testViper(tt.set))
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Equal(t, 1, strings.Count(err.Error(), w), "%q in:\n%v", w, err)
				assert.Equal(t, 1, strings.Count(err.Error(), w[:strings.IndexByte(w, ':')]), "%q reported once in:\n%v", w, err)
			}
			for _, x := range tt.excluded {
				assert.NotContains(t, err.Error(), x)
			}
			assert.Len(t, strings.Split(err.Error(), "\n"), len(tt.want), "one line per problem:\n%v", err)
		})
	}
}

// testViper is the serve configuration with the given keys set.
// A blank boolean (a settings file's empty string, a variable of spaces)
// is refused, never read as false: an empty syslog_tls_verify would turn
// collector certificate checks off, a blank freeze would unfreeze.
func TestLoadConfigBlankBooleanRefused(t *testing.T) {
	for _, key := range []string{"syslog_tls_verify", "freeze", "syslog_enabled"} {
		for _, value := range []string{"", "  "} {
			_, err := loadConfig(testViper(map[string]string{key: value}))
			assert.ErrorContains(t, err, "SVC_"+strings.ToUpper(key)+": must be true or false", "%s=%q", key, value)
		}
	}
	cfg, err := loadConfig(testViper(map[string]string{"syslog_tls_verify": "OFF"}))
	require.NoError(t, err)
	assert.True(t, cfg.Export.Syslog.TLSInsecureSkipVerify)
	cfg, err = loadConfig(testViper(nil))
	require.NoError(t, err)
	assert.False(t, cfg.Export.Syslog.TLSInsecureSkipVerify, "verifying is the default")
}

func testViper(set map[string]string) *viper.Viper {
	v := newViper(serveDefaults)
	for k, val := range set {
		v.Set(k, val)
	}
	return v
}

// TestLoadConfigDatabaseURL: SVC_DATABASE_URL must be a PostgreSQL URL, is
// never echoed with its password, and replaces SVC_HOLDS_PATH rather than
// sit beside it.
func TestLoadConfigDatabaseURL(t *testing.T) {
	tests := []struct {
		name    string
		set     map[string]string
		wantErr string // "" = valid
	}{
		{name: "postgres url", set: map[string]string{"database_url": "postgres://svc:s3cret@db:5432/svc"}},
		{name: "postgresql url", set: map[string]string{"database_url": "postgresql://svc@db/svc?sslmode=verify-full"}},
		{name: "other scheme", set: map[string]string{"database_url": "mysql://svc:s3cret@db/svc"},
			wantErr: "SVC_DATABASE_URL: must be a postgres:// or postgresql:// URL"},
		{name: "unparseable", set: map[string]string{"database_url": "postgres://svc:s3cret@db:notaport/svc"},
			wantErr: "SVC_DATABASE_URL: must be a valid PostgreSQL URL"},
		{name: "beside the sqlite file", set: map[string]string{"database_url": "postgres://db/svc", "holds_path": "/var/lib/svc/svc.db"},
			wantErr: "SVC_DATABASE_URL: replaces SVC_HOLDS_PATH"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadConfig(testViper(tt.set))
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
			assert.NotContains(t, err.Error(), "s3cret")
		})
	}
}
