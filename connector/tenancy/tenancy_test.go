package tenancy

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const hashA = "6ddb1172c39e27779f01d9fb67dfbfccaad6b580ba7e02c670bc5de636f68378"

func mapDoc(tenant, bind string) string {
	return `{"version": 1, "tenants": {"a": ` + tenant + `}, "bind": ` + bind + `}`
}

const goodTenant = `{"org": "acme", "principal": "human:lead", "environment": "production"}`

func TestParseRefuses(t *testing.T) {
	cases := map[string]struct{ doc, want string }{
		"version":        {`{"version": 2, "tenants": {"a": ` + goodTenant + `}}`, "version: must be 1"},
		"no tenants":     {`{"version": 1, "tenants": {}}`, "tenants: must name at least one tenant"},
		"no org":         {mapDoc(`{"principal": "p", "environment": "prod"}`, `{}`), "tenants.a.org: is required"},
		"no principal":   {mapDoc(`{"org": "o", "environment": "prod"}`, `{}`), "tenants.a.principal: is required"},
		"no environment": {mapDoc(`{"org": "o", "principal": "p"}`, `{}`), "tenants.a.environment: is required"},
		"environment":    {mapDoc(`{"org": "o", "principal": "p", "environment": "moon"}`, `{}`), "environment: must be production, staging or dev"},
		"unknown member": {mapDoc(`{"org": "o", "principal": "p", "environment": "prod", "colour": 1}`, `{}`), "colour"},
		"duplicate":      {`{"version": 1, "version": 1}`, "duplicate key"},
		"member in another case": {mapDoc(`{"org": "acme", "ORG": "acme-lab", "principal": "p", "environment": "prod"}`, `{}`),
			"tenants.a.ORG: member names are spelled exactly: org"},
		"top-level member in another case": {`{"version": 1, "Tenants": {"a": ` + goodTenant + `}}`,
			"Tenants: member names are spelled exactly: tenants"},
		"bind target": {mapDoc(goodTenant, `{"key_alias": {"k": "b"}}`), `names tenant "b", which the map does not define`},
		"raw key in key_hash": {mapDoc(goodTenant, `{"key_hash": {"sk-1234567890abcdefghij": "a"}}`),
			"never the key itself"},
		"literal secret in evidence": {mapDoc(`{"org": "o", "principal": "p", "environment": "prod",
			"evidence": {"token": "sk-live-4f9a8b7c6d5e4f3a2b1c"}}`, `{}`), "evidence.token: a literal secret is refused"},
		"secret-named value": {mapDoc(`{"org": "o", "principal": "p", "environment": "prod",
			"evidence": {"api_key": "hunter2"}}`, `{}`), "evidence.api_key: a literal secret is refused"},
		"_env holds a value": {mapDoc(`{"org": "o", "principal": "p", "environment": "prod",
			"evidence": {"token_env": "ghp_abcdefghijklmnopqrstuvwxyz0123456789"}}`, `{}`), "evidence.token_env: a literal secret is refused"},
		"_env holds no name": {mapDoc(`{"org": "o", "principal": "p", "environment": "prod",
			"evidence": {"token_env": "not a name"}}`, `{}`), "must hold the NAME of an environment variable"},
		"secret as label": {mapDoc(`{"org": "o", "principal": "p", "environment": "prod", "label": "xoxb-123456789012-abcdefgh"}`, `{}`),
			"label: holds what looks like a literal secret"},
		"jwt alias": {mapDoc(goodTenant, `{"key_alias": {"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc": "a"}}`), "literal secret"},
		"token in an evidence URL": {mapDoc(`{"org": "o", "principal": "p", "environment": "prod",
			"evidence": {"url": "https://e.x/push?token=ghp_abcdefghijklmnopqrstuvwxyz0123456789"}}`, `{}`), "evidence.url: a literal secret is refused"},
		"short token in a URL parameter": {mapDoc(`{"org": "o", "principal": "p", "environment": "prod",
			"evidence": {"url": "https://e.x/push?access_token=hunter2"}}`, `{}`), "evidence.url: a literal secret is refused"},
		"password in an evidence URL": {mapDoc(`{"org": "o", "principal": "p", "environment": "prod",
			"evidence": {"url": "https://user:hunter2@e.x/push"}}`, `{}`), "evidence.url: a literal secret is refused"},
		"key inside a label": {mapDoc(`{"org": "o", "principal": "p", "environment": "prod", "label": "ops (sk-live-4f9a8b7c6d5e4f3a2b1c)"}`, `{}`),
			"label: holds what looks like a literal secret"},
		"secret as a tenant's name": {`{"version": 1, "tenants": {"sk-live-4f9a8b7c6d5e4f3a2b1c": ` + goodTenant + `}}`,
			"tenants[0]: the tenant's name holds what looks like a literal secret"},
		"password under a short name": {mapDoc(`{"org": "o", "principal": "p", "environment": "prod",
			"evidence": {"pw": "P@ssw0rd!2024xyz"}}`, `{}`), "evidence.pw: a literal secret is refused"},
		"Slack webhook": {mapDoc(`{"org": "o", "principal": "p", "environment": "prod",
			"evidence": {"channel": "https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXXXXXXXXXX"}}`, `{}`), "evidence.channel: a literal secret is refused"},
		"Teams webhook": {mapDoc(`{"org": "o", "principal": "p", "environment": "prod",
			"evidence": {"channel": "https://acme.webhook.office.com/webhookb2/abc"}}`, `{}`), "evidence.channel: a literal secret is refused"},
		"Slack webhook with a port and a trailing dot": {mapDoc(`{"org": "o", "principal": "p", "environment": "prod",
			"evidence": {"channel": "https://Hooks.Slack.com.:443/services/T000/B000/XXXX"}}`, `{}`), "evidence.channel: a literal secret is refused"},
		"versioned Discord webhook": {mapDoc(`{"org": "o", "principal": "p", "environment": "prod",
			"evidence": {"channel": "https://discord.com/api/v10/webhooks/123/abc"}}`, `{}`), "evidence.channel: a literal secret is refused"},
		"token in a URL path": {mapDoc(`{"org": "o", "principal": "p", "environment": "prod",
			"evidence": {"url": "https://e.x/push/a8F3kQ9zL2mN7pR4tV6wX1yB5cD0eG3h/in"}}`, `{}`), "evidence.url: a literal secret is refused"},
		"invalid UTF-8": {mapDoc("{\"org\": \"a\xffb\", \"principal\": \"p\", \"environment\": \"prod\"}", `{}`), "invalid UTF-8"},
		"org with a colon": {`{"version": 1, "tenants": {"a": ` + goodTenant + `, "b": {"org": "acme:lab", "principal": "p", "environment": "dev"}}}`,
			"tenants.b.org: must be 1 to 64 lower-case letters"},
		"org with a slash":            {mapDoc(`{"org": "acme/x", "principal": "p", "environment": "dev"}`, `{}`), "tenants.a.org: must be"},
		"org in capitals":             {mapDoc(`{"org": "ACME", "principal": "p", "environment": "dev"}`, `{}`), "tenants.a.org: must be"},
		"org with a space":            {mapDoc(`{"org": " acme", "principal": "p", "environment": "dev"}`, `{}`), "tenants.a.org: must be"},
		"version a fraction":          {`{"version": 1.5, "tenants": {"a": ` + goodTenant + `}}`, "version: must be an integer"},
		"type error names the tenant": {mapDoc(`{"org": "o", "principal": "p", "environment": 5}`, `{}`), "tenants.a.environment: must be a string"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "sk-live-4f9a8b7c6d5e4f3a2b1c")
			assert.NotContains(t, err.Error(), "hunter2")
		})
	}
}

func TestBindOrder(t *testing.T) {
	m, err := Parse([]byte(`{"version": 1,
		"tenants": {"h": ` + goodTenant + `, "k": {"org": "k", "principal": "p", "environment": "staging"},
			"t": {"org": "t", "principal": "p", "environment": "dev",
				"evidence": {"url": "https://e.example", "token_env": "EVIDENCE_TOKEN"}}},
		"bind": {"key_hash": {"` + hashA + `": "h"}, "key_alias": {"alias": "k"},
			"team_id": {"838957f7-5698-4654-81cb-198f2efce146": "t"}}}`))
	require.NoError(t, err)
	assert.Equal(t, 3, m.Orgs())
	for _, ok := range []string{"https://e.example/push?tenant=acme&region=eu-1", "ops team (billing)", "human:support-lead",
		"838957f7-5698-4654-81cb-198f2efce146"} {
		assert.False(t, HoldsSecret(ok), ok)
	}
	cases := []struct {
		c    Caller
		name string
		by   string
	}{
		{Caller{KeyHash: hashA, KeyAlias: "alias", TeamID: "838957f7-5698-4654-81cb-198f2efce146"}, "h", "key_hash"},
		{Caller{KeyHash: strings.Repeat("1", 64), KeyAlias: "alias"}, "k", "key_alias"},
		{Caller{KeyAlias: "other", TeamID: "838957f7-5698-4654-81cb-198f2efce146"}, "t", "team_id"},
		{Caller{KeyHash: "sk-" + hashA}, "", ""},
		{Caller{KeyAlias: "ALIAS"}, "", ""},
		{Caller{}, "", ""},
	}
	for _, tc := range cases {
		b, ok := m.Bind(tc.c)
		if tc.name == "" {
			assert.False(t, ok, "%+v", tc.c)
			continue
		}
		require.True(t, ok)
		assert.Equal(t, tc.name, b.Tenant.Name)
		assert.Equal(t, tc.by, b.By)
	}
	var none *Map
	_, ok := none.Bind(Caller{KeyAlias: "alias"})
	assert.False(t, ok)
}

func TestSourceReloadKeepsLastGood(t *testing.T) {
	path := filepath.Join(t.TempDir(), "map.json")
	good := mapDoc(goodTenant, `{"key_alias": {"x": "a"}}`)
	require.NoError(t, os.WriteFile(path, []byte(good), 0o600))
	src, err := Open(path)
	require.NoError(t, err)
	require.True(t, src.Status().Loaded)
	require.NoError(t, os.WriteFile(path, []byte(`{"version": 1`), 0o600))
	changed, err := src.Reload()
	require.Error(t, err)
	assert.False(t, changed)
	st := src.Status()
	assert.True(t, st.Loaded)
	assert.NotEmpty(t, st.Error)
	_, ok := src.Map().Bind(Caller{KeyAlias: "x"})
	assert.True(t, ok, "the last good map stays in force")
	require.NoError(t, os.WriteFile(path, []byte(mapDoc(goodTenant, `{"key_alias": {"y": "a"}}`)), 0o600))
	changed, err = src.Reload()
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Empty(t, src.Status().Error)
	_, ok = src.Map().Bind(Caller{KeyAlias: "x"})
	assert.False(t, ok)

	empty, err := Open("")
	require.NoError(t, err)
	assert.False(t, empty.Status().Loaded)
	assert.Contains(t, empty.Status().Error, "every caller is refused")
	_, err = Open(filepath.Join(t.TempDir(), "missing.json"))
	require.Error(t, err)
}

// TestIsKeyHash: exactly 64 lowercase hex digits, as LiteLLM's sha256 of
// a key.
func TestIsKeyHash(t *testing.T) {
	hash := strings.Repeat("0123456789abcdef", 4)
	for s, want := range map[string]bool{
		hash: true, "6ddb1172c39e27779f01d9fb67dfbfccaad6b580ba7e02c670bc5de636f68378": true,
		strings.ToUpper(hash): false, hash[:63]: false, hash + "0": false, hash[:63] + "g": false, hash[:63] + "/": false,
		hash[:63] + ":": false, hash[:63] + "`": false, "": false, "sk-" + hash[3:]: false, hash[:62] + "é": false,
	} {
		assert.Equal(t, want, IsKeyHash(s), s)
	}
}

// TestWatchReportsAFailureOnce: a file left invalid is reported once, not
// at every poll; another failure, and a good file after it, are reported.
func TestWatchReportsAFailureOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "map.json")
	require.NoError(t, os.WriteFile(path, []byte(mapDoc(goodTenant, `{}`)), 0o600))
	src, err := Open(path)
	require.NoError(t, err)
	type report struct {
		changed bool
		failed  bool
	}
	reports := make(chan report, 100)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		src.Watch(ctx, 5*time.Millisecond, func(changed bool, err error) { reports <- report{changed, err != nil} })
	}()
	next := func() report {
		select {
		case r := <-reports:
			return r
		case <-time.After(5 * time.Second):
			t.Fatal("no report")
			return report{}
		}
	}
	replace(t, path, `{"version": 1`)
	assert.Equal(t, report{failed: true}, next())
	time.Sleep(100 * time.Millisecond) // some twenty polls of the same invalid file
	assert.Empty(t, reports, "the same failure is not reported again")
	replace(t, path, `{"version": 2}`)
	assert.Equal(t, report{failed: true}, next(), "another failure is")
	replace(t, path, mapDoc(goodTenant, `{"key_alias": {"x": "a"}}`))
	assert.Equal(t, report{changed: true}, next())
	cancel()
	<-done
}

// replace writes doc to path by renaming a whole file over it, so that a
// poll never reads it half written.
func replace(t *testing.T, path, doc string) {
	t.Helper()
	tmp := path + ".new"
	require.NoError(t, os.WriteFile(tmp, []byte(doc), 0o600))
	require.NoError(t, os.Rename(tmp, path))
}
