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

// TestSafetySwitch: SVC_REQUIRE_VERIFIED_APPROVER and SVC_VERIFY_SSL read
// the boolean words in any case; any other value, "flase" or blank, reads
// as true (the spec's fallback) with a warning naming the variable.
func TestSafetySwitch(t *testing.T) {
	tests := map[string]bool{
		"true": true, "1": true, "YES": true, "on": true,
		"false": false, "FALSE": false, " False ": false, "0": false, "no": false, "NO": false, "off": false, "Off": false,
	}
	for _, key := range []string{"require_verified_approver", "verify_ssl"} {
		for in, want := range tests {
			p := &parser{v: testViper(map[string]string{key: in})}
			require.Equal(t, want, p.safetySwitch(key), "%s=%q", key, in)
			require.NoError(t, p.first())
		}
		for _, in := range []string{"flase", "maybe", "", " "} {
			p := &parser{v: testViper(map[string]string{key: in})}
			require.True(t, p.safetySwitch(key), "%s=%q stays on", key, in)
			require.NoError(t, p.first())
			require.Len(t, p.warns, 1)
			assert.Contains(t, p.warns[0], "SVC_"+strings.ToUpper(key)+"=")
			assert.Contains(t, p.warns[0], "is not true or false: read as true, the check stays on")
		}
	}
	cfg, err := loadConfig(testViper(map[string]string{"require_verified_approver": "flase"}), nil)
	require.NoError(t, err)
	assert.True(t, cfg.RequireVerify)
	assert.Equal(t, []string{`SVC_REQUIRE_VERIFIED_APPROVER="flase" is not true or false: read as true, the check stays on; set it to true or false`}, cfg.Warnings)
}

// TestEnumeratedSettingsAnyCase: every setting of a closed set of words
// reads them in any case, as the booleans, SVC_DURABILITY and
// SVC_SYSLOG_FACILITY always did.
func TestEnumeratedSettingsAnyCase(t *testing.T) {
	cfg, err := loadConfig(testViper(map[string]string{"opa_mode": "Server", "log_level": "DEBUG", "log_format": "Console",
		"durability": "OS", "syslog_protocol": "TCP", "syslog_format": "CEF", "syslog_facility": "LOCAL3"}), nil)
	require.NoError(t, err)
	assert.Equal(t, "server", cfg.OPAMode)
	assert.Equal(t, "debug", cfg.LogLevel)
	assert.Equal(t, "console", cfg.LogFormat)
	assert.Equal(t, "tcp", cfg.Export.Syslog.Protocol)
	assert.Equal(t, "cef", cfg.Export.Syslog.Format)
	_, err = loadConfig(testViper(map[string]string{"log_format": "text"}), nil)
	require.ErrorContains(t, err, `SVC_LOG_FORMAT: must be json or console, got "text"`)
}

// TestConfigErrorNamesTheFlag: a bad value given by a flag is reported
// under the flag's name, with its variable.
func TestConfigErrorNamesTheFlag(t *testing.T) {
	_, err := loadConfig(testViper(map[string]string{"port": "70000"}), map[string]string{"port": "port"})
	require.ErrorContains(t, err, `--port (SVC_PORT): must be an integer from 0 to 65535, got "70000"`)
	_, err = loadConfig(testViper(map[string]string{"port": "70000"}), nil)
	require.ErrorContains(t, err, `SVC_PORT: must be an integer`)
}

// TestHoldSettingsAreConfiguration: an invalid SVC_RESOLVER_TOKENS or
// SVC_RESOLUTION_POLICY is found with the other settings (exit 2).
func TestHoldSettingsAreConfiguration(t *testing.T) {
	_, err := loadConfig(testViper(map[string]string{"resolver_tokens": "{not json"}), nil)
	require.ErrorContains(t, err, "invalid SVC_RESOLVER_TOKENS")
	_, err = loadConfig(testViper(map[string]string{"resolution_policy": "[]"}), nil)
	require.ErrorContains(t, err, "invalid SVC_RESOLUTION_POLICY")
}

// TestUnknownVariables: an SVC_* variable no setting reads is reported
// with the closest known name; known ones and other variables are not.
func TestUnknownVariables(t *testing.T) {
	got := unknownVariables([]string{"SVC_PROT=8080", "SVC_PORT=1", "HOME=/root", "SVC_CORE_URL=x", "SVC_VENV=/v",
		"SVC_AUDIT_LGO=/a", "SVC_LOG_FORMAT=json"})
	assert.Equal(t, []string{"SVC_AUDIT_LGO is not a setting svc reads; did you mean SVC_AUDIT_LOG?",
		"SVC_PROT is not a setting svc reads; did you mean SVC_PORT?"}, got)
}

// TestConfigFileUnknownKeys: a settings file's key that is not a setting
// is an error naming the closest one, an upper-case SVC_ name included.
func TestConfigFileUnknownKeys(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct{ body, want string }{
		{"SVC_PORT: 8081\n", `unknown key "svc_port" (keys are the SVC_ names without the prefix, in lower case); did you mean "port"?`},
		{"prot: 8081\n", `unknown key "prot"`},
		{"gate:\n  url: x\n", `unknown key "gate.url"`},
	} {
		path := filepath.Join(dir, "svc.yaml")
		require.NoError(t, os.WriteFile(path, []byte(tt.body), 0o600))
		require.ErrorContains(t, readConfigFile(newViper(serveDefaults), path), tt.want, tt.body)
	}
	path := filepath.Join(dir, "ok.yaml")
	require.NoError(t, os.WriteFile(path, []byte("port: 8081\nPORT: 8082\nfreeze: true\n"), 0o600))
	require.NoError(t, readConfigFile(newViper(serveDefaults), path))
}

// TestLoadConfigPolicyDirWithOPAURL: SVC_POLICY_DIR must name a directory,
// except with SVC_OPA_URL, whose server has its own pack and which uses
// neither SVC_POLICY_DIR nor SVC_OPA_BIN.
func TestLoadConfigPolicyDirWithOPAURL(t *testing.T) {
	tests := []configCase{
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
	runConfigCases(t, tests)
}

// configCase is a case of loadConfig: settings, and the error they give.
type configCase struct {
	name    string
	set     map[string]string
	wantErr string // "" = valid
}

// runConfigCases checks each case; no error ever echoes "s3cret".
func runConfigCases(t *testing.T, tests []configCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadConfig(testViper(tt.set), nil)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
			assert.NotContains(t, err.Error(), "s3cret")
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
			_, err := loadConfig(testViper(tt.set), nil)
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
			_, err := loadConfig(testViper(map[string]string{key: value}), nil)
			assert.ErrorContains(t, err, "SVC_"+strings.ToUpper(key)+": must be true or false", "%s=%q", key, value)
		}
	}
	cfg, err := loadConfig(testViper(map[string]string{"syslog_tls_verify": "OFF"}), nil)
	require.NoError(t, err)
	assert.True(t, cfg.Export.Syslog.TLSInsecureSkipVerify)
	cfg, err = loadConfig(testViper(nil), nil)
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
	tests := []configCase{
		{name: "postgres url", set: map[string]string{"database_url": "postgres://svc:s3cret@db:5432/svc"}},
		{name: "postgresql url", set: map[string]string{"database_url": "postgresql://svc@db/svc?sslmode=verify-full"}},
		{name: "other scheme", set: map[string]string{"database_url": "mysql://svc:s3cret@db/svc"},
			wantErr: "SVC_DATABASE_URL: must be a postgres:// or postgresql:// URL"},
		{name: "unparseable", set: map[string]string{"database_url": "postgres://svc:s3cret@db:notaport/svc"},
			wantErr: "SVC_DATABASE_URL: must be a valid PostgreSQL URL"},
		{name: "beside the sqlite file", set: map[string]string{"database_url": "postgres://db/svc", "holds_path": "/var/lib/svc/svc.db"},
			wantErr: "SVC_DATABASE_URL: replaces SVC_HOLDS_PATH"},
	}
	runConfigCases(t, tests)
}

func TestMaxConnsFor(t *testing.T) {
	for _, tt := range []struct {
		configured int
		limit      uint64
		want       int
		fails      bool
	}{
		{0, 20000, defaultMaxConns, false},
		{0, 0, defaultMaxConns, false},
		{0, 512, 512 - reservedFiles, false},
		{0, 10, 1, false},
		{5000, 20000, 5000, false},
		{5000, 0, 5000, false},
		{20000 - reservedFiles, 20000, 20000 - reservedFiles, false},
		{20000 - reservedFiles + 1, 20000, 0, true},
	} {
		got, err := maxConnsFor(tt.configured, tt.limit)
		if tt.fails {
			assert.ErrorContains(t, err, "SVC_MAX_CONNECTIONS", "%+v", tt)
			continue
		}
		assert.NoError(t, err, "%+v", tt)
		assert.Equal(t, tt.want, got, "%+v", tt)
	}
}

// TestConsoleLogFormat: SVC_LOG_FORMAT=console prints text for people, not
// JSON; json prints one object a line.
func TestConsoleLogFormat(t *testing.T) {
	var console, js strings.Builder
	for w, format := range map[*strings.Builder]string{&console: "console", &js: "json"} {
		log := newLogger(w, "info", format)
		log.Info().Str("addr", "127.0.0.1:8080").Msg("svc serving")
	}
	assert.Contains(t, console.String(), "INF svc serving addr=127.0.0.1:8080")
	assert.False(t, strings.HasPrefix(console.String(), "{"), console.String())
	assert.True(t, strings.HasPrefix(js.String(), "{"), js.String())
	assert.Contains(t, js.String(), `"message":"svc serving"`)
}

// TestLoadConfigEvalSpares: SVC_OPA_EVAL_SPARES defaults to 1 and takes
// 0–16; anything else stops start-up naming it.
func TestLoadConfigEvalSpares(t *testing.T) {
	cfg, err := loadConfig(testViper(nil), nil)
	require.NoError(t, err)
	assert.Equal(t, 1, cfg.OPAEvalSpares)
	cfg, err = loadConfig(testViper(map[string]string{"opa_eval_spares": "0"}), nil)
	require.NoError(t, err)
	assert.Equal(t, 0, cfg.OPAEvalSpares)
	runConfigCases(t, []configCase{
		{name: "sixteen", set: map[string]string{"opa_eval_spares": "16"}},
		{name: "too many", set: map[string]string{"opa_eval_spares": "17"},
			wantErr: `SVC_OPA_EVAL_SPARES: must be an integer from 0 to 16, got "17"`},
		{name: "negative", set: map[string]string{"opa_eval_spares": "-1"},
			wantErr: `SVC_OPA_EVAL_SPARES: must be an integer from 0 to 16, got "-1"`},
		{name: "not a number", set: map[string]string{"opa_eval_spares": "two"},
			wantErr: `SVC_OPA_EVAL_SPARES: must be an integer from 0 to 16, got "two"`},
	})
}

// TestEveryServeSettingIsDocumented: each variable `svc serve` reads has
// its row in docs/configuration.md.
func TestEveryServeSettingIsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "configuration.md"))
	require.NoError(t, err)
	for key := range serveDefaults {
		assert.Contains(t, string(doc), "| `SVC_"+strings.ToUpper(key)+"` |", "SVC_%s has no row", strings.ToUpper(key))
	}
}
