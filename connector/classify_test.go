package connector

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCanonicalTool(t *testing.T) {
	for in, want := range map[string]string{
		"db_delete_records":   "db_delete_records",
		"dbDeleteRecords":     "db_delete_records",
		"DB-Delete Records":   "db_delete_records",
		"ＤＢ＿ＤＥＬＥＴＥ":           "db_delete",
		"HTTPDelete":          "http_delete",
		"d\u200belete_rows":   "delete_rows",
		"dеlete_rows":         "delete_rows", // Cyrillic е
		"délete.rows":         "delete_rows",
		"purge_rows_v2":       "purge_rows_v2",
		"  send  email  ":     "send_email",
		"k8s.scaleDeployment": "k8s_scale_deployment",
	} {
		assert.Equal(t, want, CanonicalTool(in), in)
	}
}

func TestClassifyBuiltin(t *testing.T) {
	ids := make([]any, 500)
	for i := range ids {
		ids[i] = i
	}
	cases := []struct {
		name, tool, args   string
		verb, rev, br, ext string
		count              int64
		by                 string
	}{
		{"read", "crm_get_customer", `{"customer_id": "cus_1"}`, "read", "reversible", "single", "internal", 1, "builtin"},
		{"purge 500 ids is a broad delete", "purge_rows", `{"table": "t", "ids": ` + string(mustJSON(t, ids)) + `}`,
			"delete", "irreversible", "broad", "internal", 500, "builtin"},
		{"mass delete by row count is systemic", "db_delete_records", `{"expected_row_count": 1843022, "where": "x"}`,
			"delete", "irreversible", "systemic", "internal", 1843022, "builtin"},
		{"delete by filter of unknown extent", "deleteRows", `{"where": "age > 3"}`, "delete", "irreversible", "broad", "internal", 1, "builtin"},
		{"send to a list is outbound", "send_email", `{"to": ["a@x", "b@x", "c@x"], "subject": "hi"}`,
			"emit", "irreversible", "scoped", "outbound", 3, "builtin"},
		{"recipients in a string", "sendEmail", `{"to": "a@x, b@x", "cc": "c@x"}`, "emit", "irreversible", "scoped", "outbound", 3, "builtin"},
		{"shell is execute", "run_shell", `{"command": "ls"}`, "execute", "irreversible", "broad", "internal", 1, "builtin"},
		{"payment", "stripe_refund_charge", `{"amount": 10}`, "transact", "irreversible", "single", "outbound", 1, "builtin"},
		{"unknown tool", "frobnicate_widget", `{}`, "execute", "irreversible", "broad", "outbound", 1, "cautious:unknown_tool"},
		{"a tab between words", "drop\ttable", `{}`, "execute", "irreversible", "broad", "outbound", 1, "cautious:invisible_characters"},
		{"a line break between words", "destroy\ncluster", `{}`, "execute", "irreversible", "broad", "outbound", 1, "cautious:invisible_characters"},
		{"a next-line character", "delete\u0085database", `{}`, "execute", "irreversible", "broad", "outbound", 1, "cautious:invisible_characters"},
		{"a zero-width space", "drop\u200btable", `{}`, "execute", "irreversible", "broad", "outbound", 1, "cautious:invisible_characters"},
		{"a soft hyphen in a read", "crm_get\u00adcustomer", `{"ids": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101]}`,
			"execute", "irreversible", "broad", "outbound", 101, "cautious:invisible_characters"},
		{"a space parts words, as it always did", "drop table", `{}`, "delete", "irreversible", "broad", "internal", 1, "builtin"},
		{"unparsable arguments", "crm_get_customer", `{"customer_id": `, "execute", "irreversible", "broad", "outbound", 1, "cautious:unparsable_arguments"},
		{"duplicate argument", "crm_get_customer", `{"id": "1", "id": "2"}`, "execute", "irreversible", "broad", "outbound", 1, "cautious:unparsable_arguments"},
		{"arguments not an object", "crm_get_customer", `["x"]`, "execute", "irreversible", "broad", "outbound", 1, "cautious:unparsable_arguments"},
		{"dropping a table deletes it whole", "drop_table", `{"table": "users"}`, "delete", "irreversible", "broad", "internal", 1, "builtin"},
		{"destroying a cluster", "destroyCluster", `{}`, "delete", "irreversible", "broad", "internal", 1, "builtin"},
		{"truncate anywhere", "truncate_rows", `{}`, "delete", "irreversible", "broad", "internal", 1, "builtin"},
		{"wipe a disk", "wipe_disk", `{}`, "delete", "irreversible", "broad", "internal", 1, "builtin"},
		{"delete all", "delete_all_sessions", `{}`, "delete", "irreversible", "broad", "internal", 1, "builtin"},
		{"a container word that is not the object", "db_delete_records", `{"id": 7}`, "delete", "irreversible", "single", "internal", 1, "builtin"},
		{"money sent is a transaction", "send_money", `{"to": "acct_1", "amount": "10"}`, "transact", "irreversible", "single", "outbound", 1, "builtin"},
		{"scaled to zero is an outage", "k8s_scale_deployment", `{"deployment": "api", "replicas": 0}`, "update", "irreversible", "broad", "internal", 1, "builtin"},
		{"scaled to zero, quoted", "scaleService", `{"desired_count": "0"}`, "update", "irreversible", "broad", "internal", 1, "builtin"},
		{"scaled to three", "k8s_scale_deployment", `{"deployment": "api", "replicas": 3}`, "update", "recoverable", "single", "internal", 1, "builtin"},
		{"a count nested in an object", "delete_rows", `{"options": {"expected_row_count": 1843022}}`, "delete", "irreversible", "systemic", "internal", 1843022, "builtin"},
		{"ids nested in an object", "purge_rows", `{"selection": {"ids": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]}}`, "delete", "irreversible", "broad", "internal", 13, "builtin"},
		{"an unreadable nested count", "delete_rows", `{"options": {"limit": {"max": 5}}}`, "delete", "irreversible", "systemic", "internal", maxCount, "builtin"},
		{"update of all rows", "update_all_rows", `{}`, "update", "recoverable", "broad", "internal", 1, "builtin"},
		{"read of all rows stays single", "list_all_rows", `{}`, "read", "reversible", "single", "internal", 1, "builtin"},
		{"ids in one string", "purge_rows", `{"ids": "1,2,3,4,5,6,7,8,9,10,11,12,13"}`, "delete", "irreversible", "broad", "internal", 13, "builtin"},
		{"recipients separated by spaces", "send_email", `{"to": "a@x b@x c@x"}`, "emit", "irreversible", "scoped", "outbound", 3, "builtin"},
		{"recipients in one string of a list", "send_email", `{"to": ["a@x, b@x", "c@x"]}`, "emit", "irreversible", "scoped", "outbound", 3, "builtin"},
		{"escaped lone surrogate", "crm_get_customer", `{"customer_id": "\ud800"}`, "execute", "irreversible", "broad", "outbound", 1, "cautious:unparsable_arguments"},
		{"empty arguments", "list_invoices", ``, "read", "reversible", "single", "internal", 1, "builtin"},
		{"negative count counts as most", "delete_rows", `{"count": -1}`, "delete", "irreversible", "systemic", "internal", maxCount, "builtin"},
		{"a count quoted as a string is read", "db_delete_records", `{"expected_row_count": "1843022"}`,
			"delete", "irreversible", "systemic", "internal", 1843022, "builtin"},
		{"a quoted count with spaces", "delete_rows", `{"n": " 7 "}`, "delete", "irreversible", "scoped", "internal", 7, "builtin"},
		{"a count that is a word counts as most", "delete_rows", `{"count": "abc"}`, "delete", "irreversible", "systemic", "internal", maxCount, "builtin"},
		{"a count with separators counts as most", "delete_rows", `{"rows": "1,843,022"}`, "delete", "irreversible", "systemic", "internal", maxCount, "builtin"},
		{"a count that is an object counts as most", "delete_rows", `{"limit": {"max": 5}}`, "delete", "irreversible", "systemic", "internal", maxCount, "builtin"},
		{"a count that is true counts as most", "delete_rows", `{"row_count": true}`, "delete", "irreversible", "systemic", "internal", maxCount, "builtin"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Classify(nil, tc.tool, tc.args)
			assert.Equal(t, tc.verb, c.Verb)
			assert.Equal(t, tc.rev, c.Axes.Reversibility)
			assert.Equal(t, tc.br, c.Axes.BlastRadius)
			assert.Equal(t, tc.ext, c.Axes.Externality)
			assert.Equal(t, tc.count, c.Count)
			assert.Equal(t, tc.by, c.By)
			require.NotNil(t, c.Params)
		})
	}
}

func TestClassifyUnparsableBindsTheArguments(t *testing.T) {
	a, b := Classify(nil, "x", `{"a": 1`), Classify(nil, "x", `{"a": 2`)
	require.NotEqual(t, a.Params["unparsed_arguments_sha256"], b.Params["unparsed_arguments_sha256"])
}

// TestClassifyEnvironmentNotAString: an environment argument the connector
// cannot read as one (a list, an object) reads as production, the
// riskiest; null is no environment.
func TestClassifyEnvironmentNotAString(t *testing.T) {
	for _, args := range []string{`{"environment": ["production"]}`, `{"env": {"name": "production"}}`, `{"stage": 1}`} {
		assert.Equal(t, "production", Classify(nil, "db_delete_records", args).Env, args)
	}
	assert.Empty(t, Classify(nil, "db_delete_records", `{"environment": null}`).Env)
}

func TestClassifyEnvironmentAndRef(t *testing.T) {
	c := Classify(nil, "db_delete_records", `{"environment": "dev", "env": "PRD", "table": "user_sessions"}`)
	assert.Equal(t, "production", c.Env, "the riskiest environment the arguments name")
	assert.Equal(t, "user_sessions", c.Ref)
	assert.Equal(t, "staging", riskierEnv("staging", "dev"))
	assert.Equal(t, "staging", riskierEnv("staging", ""))
	assert.Equal(t, "production", riskierEnv("staging", "production"))
}

func TestToolMap(t *testing.T) {
	tm, err := LoadToolMap("testdata/tools.json")
	require.NoError(t, err)
	c := Classify(tm, "billingVoidInvoices", `{"customer_id": "cus_1", "invoice_ids": ["a", "b", "c"]}`)
	assert.Equal(t, "tool_map:billing_void_*", c.By)
	assert.Equal(t, "delete", c.Verb)
	assert.Equal(t, "broad", c.Axes.BlastRadius)
	assert.Equal(t, int64(3), c.Count)
	assert.Equal(t, "invoice", c.Kind)
	assert.Equal(t, "cus_1", c.Ref)
	exact := Classify(tm, "k8s_scale_deployment", `{"deployment": "api", "replicas": 0}`)
	assert.Equal(t, "tool_map:k8s_scale_deployment", exact.By)
	assert.Equal(t, "irreversible", exact.Axes.Reversibility)
	assert.Equal(t, "api", exact.Ref)
	assert.Equal(t, "builtin", Classify(tm, "crm_get_customer", `{}`).By)
	quoted := Classify(tm, "billing_void_invoices", `{"invoice_ids": "1843022"}`)
	assert.Equal(t, int64(1843022), quoted.Count, "a count_from string holding a number is that number")
	assert.Equal(t, int64(2), Classify(tm, "billing_void_invoices", `{"invoice_ids": "a, b"}`).Count)
	for _, unreadable := range []string{`{"a": 1}`, `true`, `null`} {
		c := Classify(tm, "billing_void_invoices", `{"invoice_ids": `+unreadable+`}`)
		assert.Equal(t, int64(maxCount), c.Count, "a count_from value that is no list, number or string counts as the most: %s", unreadable)
	}
}

func TestToolMapRefused(t *testing.T) {
	for name, doc := range map[string]string{
		"version":              `{"version": 2, "tools": []}`,
		"unknown":              `{"version": 1, "tools": [{"match": "a", "colour": "red"}]}`,
		"not canonical":        `{"version": 1, "tools": [{"match": "DeleteRows"}]}`,
		"verb":                 `{"version": 1, "tools": [{"match": "a", "verb": "nuke"}]}`,
		"axis":                 `{"version": 1, "tools": [{"match": "a", "blast_radius": "huge"}]}`,
		"twice":                `{"version": 1, "tools": [{"match": "a"}, {"match": "a"}]}`,
		"duplicate key":        `{"version": 1, "version": 1, "tools": []}`,
		"another case":         `{"version": 1, "tools": [{"match": "safe_thing", "verb": "read", "VERB": "delete"}]}`,
		"count and count_from": `{"version": 1, "tools": [{"match": "a", "count": 2, "count_from": "ids"}]}`,
		"count 0":              `{"version": 1, "tools": [{"match": "zero_*", "count": 0}]}`,
		"count too large":      `{"version": 1, "tools": [{"match": "a", "count": 1000000000001}]}`,
		"no tools":             `{"version": 1}`,
		"tools null":           `{"version": 1, "tools": null}`,
		"double _":             `{"version": 1, "tools": [{"match": "a__b"}]}`,
		"leading _":            `{"version": 1, "tools": [{"match": "_a*"}]}`,
	} {
		_, err := parseToolMap([]byte(doc))
		require.Error(t, err, name)
	}
	tm, err := parseToolMap([]byte(`{"version": 1, "tools": [{"match": "one_*", "count": 1}]}`))
	require.NoError(t, err)
	assert.Equal(t, int64(1), Classify(tm, "one_delete", `{"ids": [1, 2, 3]}`).Count, "count 1 is a count, not absent")
}
