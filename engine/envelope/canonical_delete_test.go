package envelope

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"golang.org/x/text/unicode/norm"
)

// assertDelete checks that a spelling is delete as the verb and inside the
// ability, with a recoverable reversibility (an unknown verb would be
// update).
func assertDelete(t *testing.T, spelling string) {
	t.Helper()
	assert.Equal(t, "delete", CanonicalVerb(spelling, "x/y", "recoverable"), "verb %q", spelling)
	assert.Equal(t, "delete", CanonicalVerb("read", "db/"+spelling, "recoverable"), "ability db/%q", spelling)
}

// TestCanonicalVerbDeleteSpellings: spellings of a delete found to escape
// the delete class (read as update, charging nothing to the session's
// delete budget), and their neighbours.
func TestCanonicalVerbDeleteSpellings(t *testing.T) {
	for _, spelling := range []string{
		// Inflections.
		"deleting", "removing", "purging", "dropping", "dropped", "erasing", "wiping", "truncating",
		"deleted", "removed", "purged", "wiped", "wipes", "drops", "nuked", "voided", "dels", "flushes",
		"DELETING", "Deleting", "bulkDeleting", "bulk_deleting", "deletingRecords", "deletingrecords",
		"truncatingtables", "hardDropping",
		// Diacritics (precomposed letters, which NFKC keeps).
		"dělete", "délete", "ḋelete", "DÉLETE", "drőp", "ẅipe", "pürge", "délèting",
		"d\u0435l\u0451te", // Cyrillic е and ё
		// Digits and look-alikes standing for letters.
		"deIete", "de1ete", "DEIETE", "bulkDeIete", "de|ete", "de!ete", "d3l3t3", "dr0p", "DR0P",
		"dr0pTable", "pur9e", "er@se", "tr@sh", "$hred", "5hred", "w1pe", "WIPE", "dełete", "d€lete",
		"ԁеӏеtе", "de1eting",
		// Stand-ins in upper case: a digit does not split an all-caps word,
		// which reads as its lower-case spelling, inside too; a word that
		// mixes cases only at its start.
		"DR0PTABLE", "DE1ETERECORDS", "W1PEDISK", "BULKD3LETE", "DE1ETION", "bulkd3lete", "HARDDE1ETE",
		"De1User", "Dr0pTable", "De1eteRecords", "W1peDisk", "xDe1Ete", "getDe1User", "Layer4De1Ete",
		// Separated letters and pieces.
		"d-e-l-e-t-e", "d e l e t e", "D.E.L.E.T.E", "d_e_l_e_t_e", "re move", "re-moved", "re moving",
		"de lete", "dr op", "wi ped", "un install", "de commission", "r m", "d e l", "reMove", "dElEtE",
		"d\u00a0e\u3000l\u2003e-t_e",
		// Short aliases leading a run-together word.
		"droptable", "dropdb", "dropTABLE", "DROPTABLE", "wipedisk", "nukeall", "voidinvoice", "rmrf",
		"drop_table",
		// Nouns of deletion, by themselves and run together.
		"deletion", "deletions", "removal", "removals", "erasure", "destruction", "termination",
		"truncation", "obliteration", "expungement", "eviction", "purge", "wipeout", "teardown_wipeout",
		"account_deletion", "schedule_deletion", "bulkdeletion", "BULKDELETION", "gdpr_erasure",
		"request_removal", "data_destruction", "account_termination", "table_truncation",
		"ACCOUNT_DELETION", "accountDeletion", "dele tion", "de1etion", "remova1", "terminations",
		"truncations",
		// Nouns beside an update or a riskier verb: a name that changes or
		// runs a deletion may carry it out.
		"approve_deletion", "commit_removal", "sync_deletions", "run_deletion_check", "apply_deletion_policy",
		"get_and_run_deletion", "schedule_key_deletion",
		// rm and del leading a run-together word before an object or a verb
		// alias, whatever the case.
		"DELUSER", "deluser", "DelUser", "delUser", "RMFILE", "rmFile", "DELOBJECT", "delobject",
		"DelObject", "DELFILE", "rmall", "RMALL", "DELALL", "rmtree", "RMTREE", "shutil.rmtree", "hdfs_rmr",
		"rmr", "RMR", "delgroup", "delusers", "rmfiles", "rmdirs", "deltag", "delposts", "rmbranches",
		"de1user", "DE1USER", "De1User", "DE1ALL", "RMF1LE", "rmF1le",
		"delattr", "rmattr", "delmsg", "DELMSGS", "delentry", "delentries", "delfield", "rmcol", "delcolumn",
		"deldoc", "rmdocs", "delimage", "rmimages", "rmcontainer", "delsecret", "delrole", "delpolicy",
		"rmpolicies", "delproject", "rmpath", "delfolder", "deljob", "RMJOBS", "delqueries",
		// Command names of Redis, Python, FTP and POP3, as words or joined
		// pieces.
		"hdel", "HDEL", "HDel", "xdel", "XDel", "getdel", "GetDel", "srem", "SRem", "zrem", "ZRem", "lrem",
		"LRem", "zremrangebyscore", "ZREMRANGEBYRANK", "zremrangebylex", "zremrangeByLex", "ZRemRangeByScore",
		"zremrange_by_score", "delattr", "__delattr__", "DelAttr", "dele", "DELE", "ftp.dele", "rmd", "RMD",
		"ftp/rmd",
		// Destructive tool names.
		"rimraf", "deltree", "rm -rf", "rm_rf", "shred", "nuke", "userdel", "USERDEL", "groupdel", "rmdir",
		// False positives docs/policy.md owns up to: the rule errs towards risk.
		"presets", "clearance", "dropper", "wipers", "voldemort", "platformdirs",
		"modeltrees", "deidata", "list_deleted_items", "count_dropped_packets", "list_voided_invoices",
		"get_wiped_devices", "count_packet_drops", "indeterminate", "UpdateTerminationProtection",
		"ModifyDBInstance_DeletionProtection", "set_eviction_policy", "ssl_termination", "render_rmd",
		"get_rmd_amount", "GETLAYER4SETTINGS", "getlayer4settings",
	} {
		assertDelete(t, spelling)
	}
}

// TestCanonicalVerbDeleteAliasForms derives spellings from every delete
// alias: its inflections, the alias cut into pieces, with look-alikes, and
// with diacritics.
func TestCanonicalVerbDeleteAliasForms(t *testing.T) {
	forms := map[string][]string{
		"delete":  {"deleting", "deleted", "deletes", "deletion", "deletions"},
		"remove":  {"removing", "removed", "removes", "removal", "removals"},
		"destroy": {"destroying", "destroyed", "destroys", "destruction", "destructions"},
		"purge":   {"purging", "purged", "purges"}, "drop": {"dropping", "dropped", "drops"},
		"truncate": {"truncating", "truncated", "truncates", "truncation", "truncations"},
		"rm":       {}, "rmdir": {"rmdiring", "rmdired", "rmdirs"},
		"erase":  {"erasing", "erased", "erases", "erasure", "erasures"},
		"unlink": {"unlinking", "unlinked", "unlinks"}, "wipe": {"wiping", "wiped", "wipes"},
		"del":       {"deleting", "deled", "dels"},
		"terminate": {"terminating", "terminated", "terminates", "termination", "terminations"},
		"shred":     {"shredding", "shredded", "shreds"},
		"expunge":   {"expunging", "expunged", "expunges", "expungement", "expungements"},
		"evict":     {"evicting", "evicted", "evicts", "eviction", "evictions"},
		"prune":     {"pruning", "pruned", "prunes"},
		"void":      {"voiding", "voided", "voids"}, "nuke": {"nuking", "nuked", "nukes"},
		"obliterate":   {"obliterating", "obliterated", "obliterates", "obliteration", "obliterations"},
		"deprovision":  {"deprovisioning", "deprovisioned", "deprovisions"},
		"decommission": {"decommissioning", "decommissioned", "decommissions"},
		"uninstall":    {"uninstalling", "uninstalled", "uninstalls"}, "flush": {"flushing", "flushed", "flushes"},
		"clear": {"clearing", "cleared", "clears"}, "reset": {"resetting", "reset", "resets"},
		"discard": {"discarding", "discarded", "discards"}, "trash": {"trashing", "trashed", "trashes"},
		"rimraf": {"rimrafing", "rimrafed"}, "rmrf": {"rmrfing"}, "deltree": {"deltreeing", "deltreed"},
		"userdel": {"userdels"}, "groupdel": {"groupdels"},
		// commandAliases: no inflections, nouns or skeletons.
		"hdel": {}, "xdel": {}, "getdel": {}, "srem": {}, "zrem": {}, "lrem": {}, "zremrangebyscore": {},
		"zremrangebyrank": {}, "zremrangebylex": {}, "delattr": {}, "dele": {}, "rmd": {},
	}
	for alias, canon := range verbAliases {
		if canon != "delete" {
			continue
		}
		inflected, ok := forms[alias]
		assert.True(t, ok, "delete alias %q has no forms in this test", alias)
		for _, f := range append([]string{alias, strings.ToUpper(alias)}, inflected...) {
			assertDelete(t, f)
		}
		for i := 1; i < len(alias); i++ {
			for _, sep := range []string{" ", "-", "_", ".", "/"} {
				assertDelete(t, alias[:i]+sep+alias[i:])
			}
			assertDelete(t, alias[:i]+strings.ToUpper(alias[i:i+1])+alias[i+1:]) // camelCase split
		}
		assertDelete(t, strings.Join(strings.Split(alias, ""), "-"))
		assertDelete(t, norm.NFC.String(alias[:1]+"\u0307"+alias[1:])) // ḋelete, ṙemove
		assertDelete(t, norm.NFC.String(alias[:2]+"\u030c"+alias[2:])) // dělete, reͨmove
		if len(alias) >= 4 && !slices.Contains(commandAliases, alias) {
			leet := strings.NewReplacer("l", "1", "o", "0", "e", "3", "i", "1", "s", "5", "a", "4", "t", "7")
			assertDelete(t, leet.Replace(alias))
			assertDelete(t, strings.ReplaceAll(alias, "l", "I"))
			for _, from := range []string{"l", "o", "e", "i"} {
				assertDelete(t, strings.Replace(alias, from, leet.Replace(from), 1))
			}
		}
	}
}

// TestCanonicalVerbNotDelete: ordinary words near the delete spellings keep
// their verb.
func TestCanonicalVerbNotDelete(t *testing.T) {
	cases := []struct {
		verb, ability, want string
	}{
		{"read", "ui/dropdown", "read"},
		{"read", "ui/list_dropdowns", "read"},
		{"read", "storage/dropbox_files", "read"},
		{"read", "do/list_droplets", "read"},
		{"read", "ml/dropout_rate", "read"},
		{"read", "ui/backdrop", "read"},
		{"read", "ui/swipe_events", "read"},
		{"read", "crm/avoid_list", "read"},
		{"read", "shop/delivery_status", "read"},
		{"read", "jobs/delay", "read"},
		{"read", "db/delta", "read"},
		{"read", "crm/format", "read"},
		{"read", "ops/alarm", "read"},
		{"read", "crm/get_user_assets", "read"}, // "user asset": no erase across words
		{"read", "shop/store_settings", "read"}, // nor a reset
		{"read", "ops/era_settings", "read"},
		{"read", "ops/dr_options", "read"},
		{"read", "metrics/rms", "read"},   // rm has no inflections
		{"read", "hr/dei_report", "read"}, // nor look-alikes: dei, de1 are no del
		{"read", "x/de1", "read"},
		{"read", "aws/s3_list", "read"},
		{"get_rms", "", "read"},
		{"dei", "", "update"},
		{"read", "hr/dei_data", "read"}, // dei and data are two words: no del before data
		{"read", "hr/DEI_DATA", "read"},
		// userdel and groupdel are not looked for inside words.
		{"read", "azure/getuserdelegationkey", "read"},
		{"read", "azure/GETUSERDELEGATIONKEY", "read"},
		{"read", "shop/groupdelivery", "read"},
		{"read", "net/userdelay", "read"},
		// rm and del lead only before exactly a listed word.
		{"read", "x/delfoo", "read"},
		{"read", "x/rmstuff", "read"},
		{"read", "x/bulkdeluser", "read"},
		{"read", "x/de luser", "read"},
		{"read", "x/de1 user", "read"},
		{"read", "net/packet_loss", "read"},
		// A capital after a digit starts a word in a name that mixes cases:
		// only a match at the start of the word run together across it counts.
		{"read", "aws/getLayer4Settings", "read"},
		{"read", "aws/describeLayer4Services", "read"},
		{"read", "x/getTier3Settings", "read"},
		{"read", "x/get_layer4_settings", "read"},
		{"read", "x/layer4Settings", "read"},
		{"getLayer4Settings", "", "read"},
		{"getTier3Settings", "", "read"},
		{"read", "x/getLayer4SETTINGS", "read"},
		{"read", "s3/getS3Object", "read"},
		// Nouns of deletion in a name that reads, with nothing riskier than
		// update beside it, name what is read.
		{"read", "autoscaling/DescribeTerminationPolicyTypes", "read"},
		{"DescribeTerminationPolicyTypes", "", "read"},
		{"read", "elb/describe_ssl_termination", "read"},
		{"read", "llm/get_context_truncation", "read"},
		{"read", "llm/get_truncation_strategy", "read"},
		{"read", "cdk/list_removal_policies", "read"},
		{"read", "gdpr/get_data_retention_and_deletion_policy", "read"},
		{"read", "gdpr/get_deletion_status", "read"},
		{"read", "gdpr/account_deletion_status", "read"}, // status is a read alias
		{"read", "x/get_bulkdeletion_count", "read"},
		{"read", "x/get_tls_termination_config", "update"}, // config is an update alias, as it was
		{"get_tls_termination_config", "", "update"},
		// termination and truncation count as words only.
		{"read", "tax/get_tax_determination", "read"},
		{"read", "tax/tax_determination", "read"},
		{"determination", "", "update"},
		{"predetermination", "", "update"},
		// Command names are words, with no look-alikes or longer words.
		{"read", "css/margin_1rem", "read"},
		{"read", "css/5rem", "read"},
		{"read", "hr/irem", "read"},
		{"read", "x/de1e", "read"},
		{"read", "x/hde1", "read"},
		{"read", "tools/xdelta3", "read"},
		{"read", "redis/zrangebyscore", "read"},
		{"read", "redis/zrems", "read"},
		{"read", "hadoop/getdelegationtoken", "read"},
		{"read", "hadoop/getDelegationToken", "read"},
		// Not recognised (docs/policy.md says so).
		{"löschen", "", "update"},
		{"supprimer", "", "update"},
		{"удалить", "", "update"},
		{"eradicate", "", "update"},
		{"eradication", "", "update"},
		{"eliminate", "", "update"},
		{"elimination", "", "update"},
		{"teardown", "", "update"},
		{"scrub", "", "update"},
		{"bulkde lete", "", "update"},
		{"bulkde1Ete", "", "update"},
		{"accounttermination", "", "update"},
		{"zremmed", "", "update"},
		{"hdelall", "", "update"},
		{"read", "gdpr/scan_and_schedule_deletion", "read"},
		{"sent", "", "update"},
		{"paid", "", "update"},
		{"alarm", "", "update"},
		{"format", "", "update"},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, CanonicalVerb(c.verb, c.ability, "recoverable"), "verb %q ability %q", c.verb, c.ability)
	}
}

// TestCanonicalVerbNotDeleteAnyCase: words that start with rm or del, or
// have them inside, stay non-delete in any case: rm and del lead a delete
// only before exactly a listed word.
func TestCanonicalVerbNotDeleteAnyCase(t *testing.T) {
	for _, w := range []string{
		"delta", "delivery", "deliver", "delegate", "delight", "delay", "delicate", "deluxe", "delusion",
		"delist", "deli", "dells", "rmb", "rms", "rmi", "rmse", "format", "alarm", "armor", "farm", "term",
		"model", "yodel", "dei", "deity", "delimiter", "delimit", "delphi", "delegation", "deleg", "rmsnorm",
		"xdelta", "irem", "remedy", "dell",
	} {
		for _, s := range []string{w, strings.ToUpper(w), strings.ToUpper(w[:1]) + w[1:]} {
			assert.Equal(t, "read", CanonicalVerb("read", "x/"+s, "recoverable"), "ability x/%q", s)
			assert.Equal(t, "update", CanonicalVerb(s, "x/y", "recoverable"), "verb %q", s)
		}
	}
}

// TestCanonicalVerbInflections: the -ing and -ed forms of every verb's
// aliases are that verb in the raw verb when none of its words is an alias;
// in abilities, and next to an alias, they are nouns and adjectives as
// often.
func TestCanonicalVerbInflections(t *testing.T) {
	cases := []struct {
		verb, ability, reversibility, want string
	}{
		{"reading", "", "recoverable", "read"},
		{"updating", "", "recoverable", "update"},
		{"updated", "", "recoverable", "update"},
		{"sending", "", "recoverable", "emit"},
		{"Publishing", "", "recoverable", "emit"},
		{"paying", "", "recoverable", "transact"},
		{"transferred", "", "recoverable", "transact"},
		{"deploying", "", "recoverable", "execute"},
		{"running", "", "recoverable", "execute"},
		{"stopped", "", "recoverable", "execute"},
		{"created", "", "recoverable", "create"},
		{"copied", "", "recoverable", "create"},
		{"applied", "", "recoverable", "execute"},
		{"settingUp", "", "recoverable", "update"},
		{"reading", "", "irreversible", "read"},
		{"reading", "db/delete_rows", "recoverable", "delete"},
		{"shed", "", "recoverable", "update"}, // sh has no inflections
		{"get_billing", "", "recoverable", "read"},
		{"list_installed_packages", "", "recoverable", "read"},
		{"get_sending_status", "", "recoverable", "read"},
		{"read", "billing/get_summary", "recoverable", "read"},
		{"read", "billing/invoices", "recoverable", "read"},
		{"read", "apps/list_installed", "recoverable", "read"},
		{"read", "drive/shared_files", "recoverable", "read"},
		{"orders", "", "recoverable", "update"}, // plurals of the other verbs are nouns
		{"messages", "", "recoverable", "update"},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, CanonicalVerb(c.verb, c.ability, c.reversibility), "verb %q ability %q %s", c.verb, c.ability, c.reversibility)
	}
}

// verbCases are realistic verb and ability pairs for measuring
// CanonicalVerb on the decision path: plain names, names with digits and
// a non-ASCII one, with the most allocations each may cost: the words of
// a printable ASCII name are cut from it, and cost one allocation for each
// lower-cased camelCase word and, for the verb and for the ability, one
// for their skeletons if any differs from its word.
var verbCases = []struct {
	verb, ability string
	allocs        float64
}{
	{"read", "files/read_file", 1},
	{"update", "s3/put_object_v2", 1},
	{"get", "ec2/describeInstances", 2},
	{"write", "db/insert_rows", 2},
	{"delete", "github/delete_branch", 0},
	{"send", "slack/post_message", 0},
	{"execute", "k8s/apply_manifest", 1},
	{"read", "oauth2/get_token", 0},
	{"update", "ec2/modifyInstanceAttribute", 3},
	{"read", "files/lire_le_fichier_été", 16},
}

// BenchmarkCanonicalVerb measures the time and allocations of
// CanonicalVerb over verbCases.
func BenchmarkCanonicalVerb(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		c := verbCases[i%len(verbCases)]
		CanonicalVerb(c.verb, c.ability, "recoverable")
	}
}

// TestNamesDeleteResplits: words and namesDelete, which split a name
// again only where resplits says its stand-ins may split it otherwise,
// from a name normalised once, give what the full path gives
// (namesDeleteFull) on names built from pieces of delete spellings,
// stand-ins, cases, separators and non-ASCII look-alikes and marks.
func TestNamesDeleteResplits(t *testing.T) {
	pieces := []string{
		"de", "l", "ete", "DEL", "ETE", "Del", "ete", "d", "e", "1", "3", "0", "4", "|", "!", "$", "@", "€", "I", "i",
		"drop", "DR0P", "Dr0p", "TABLE", "Table", "user", "User", "wipe", "W1PE", "rm", "RF", "tree", "get", "read",
		"Settings", "Layer", "tion", "remove", "purge", "_", "/", "-", " ", "é", "ł", "Ł", "е", "\u0903", "\u0301",
		"\u200b", "Ｄ", "４", "＄", "١", "ǅ", "ᴅ",
	}
	rng := rand.New(rand.NewPCG(3, 7))
	deletes := 0
	for range 100000 {
		var b strings.Builder
		for range 1 + rng.IntN(7) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		raw := b.String()
		var buf [maxNameWords]string
		name, ws := words(buf[:], raw)
		want := wordsFull(raw)
		if !slices.Equal(ws, want) {
			t.Fatalf("words(%q) = %q, want %q", raw, ws, want)
		}
		got := namesDelete(name, ws)
		if got != namesDeleteFull(raw, want) {
			t.Fatalf("namesDelete(%q) = %v, the full path differs", raw, got)
		}
		if got {
			deletes++
		}
	}
	t.Logf("%d names spell a delete", deletes)
}

// wordsFull is words as it was before the fast paths: split from []rune.
func wordsFull(s string) []string {
	out := splitWordsFull(s, isWordRune, camelBoundary)
	for i, w := range out {
		out[i] = undiacritic(Fold(w))
	}
	return out
}

// splitWordsFull is splitWords as it was: it normalises the name itself
// and builds each word rune by rune.
func splitWordsFull(s string, inWord func(rune) bool, boundary func(prev, next rune) bool) []string {
	if !printableASCII(s) {
		s = bare(s)
	} else {
		s = Clean(s)
	}
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			out = append(out, string(cur))
			cur = cur[:0]
		}
	}
	runes := []rune(s)
	for i, r := range runes {
		if unicode.Is(unicode.Mc, r) {
			continue
		}
		if !inWord(r) {
			flush()
			continue
		}
		next := utf8.RuneError
		if i+1 < len(runes) {
			next = runes[i+1]
		}
		if i > 0 && unicode.IsUpper(r) && len(cur) > 0 && boundary(runes[i-1], next) {
			flush()
		}
		cur = append(cur, r)
	}
	flush()
	return out
}

// namesDeleteFull is namesDelete as it was: any name with a stand-in is
// normalised and split again.
func namesDeleteFull(name string, ws []string) bool {
	d := deletes
	if readsOnly(ws) {
		d = deletesInReads
	}
	sk := make([]string, len(ws))
	for i, w := range ws {
		sk[i] = skeleton(w)
	}
	if d.plain.in(ws, nil) || d.skeletal.in(sk, nil) {
		return true
	}
	if !printableASCII(name) {
		name = bare(name)
	}
	if !strings.ContainsFunc(name, isStandIn) {
		return false
	}
	split := splitWordsFull(name, isSkeletonRune, skeletonBoundary)
	atStart := make([]bool, len(split))
	for i, w := range split {
		atStart[i] = mixedCase(w)
		split[i] = skeleton(undiacritic(Fold(w)))
	}
	return d.skeletal.in(split, atStart)
}
