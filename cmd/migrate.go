package cmd

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/svc-dev/svc/holds"
	"github.com/svc-dev/svc/ledger"
)

// migrateExitHelp is the exit-code paragraph of `svc migrate --help`.
const migrateExitHelp = "Exit code: 0 up to date (--check) or migrated, 1 the database cannot be read or migrated,\n" +
	"2 written by a newer svc (or SVC_HOLDS_PATH unset, or another process writes it), 3 (--check) migrations pending,\n" +
	"64 usage error."

// exitPending is the exit code of `svc migrate --check` when the database
// needs migrating.
const exitPending = 3

// schemaPart is one of the two sets of migrations of the engine's
// database: the ledger's and the holds store's, each with its own table.
type schemaPart struct {
	name    string
	known   []string // migrations this build applies
	applied []string // migrations recorded in the database
}

// version is the number of the last of names ("0004_x.sql" is 4), 0 for
// none.
func version(names []string) int {
	if len(names) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(strings.SplitN(slices.Max(names), "_", 2)[0]) // a name that is no number reads 0
	return n
}

// pending returns the known migrations the database lacks.
func (s schemaPart) pending() []string {
	var out []string
	for _, k := range s.known {
		if !slices.Contains(s.applied, k) {
			out = append(out, k)
		}
	}
	return out
}

// newer returns the applied migrations this build does not know: a newer
// svc wrote the database.
func (s schemaPart) newer() []string {
	var out []string
	for _, a := range s.applied {
		if !slices.Contains(s.known, a) {
			out = append(out, a)
		}
	}
	return out
}

// readSchema reads both parts of the schema of the database db.
func readSchema(ctx context.Context, db *sql.DB) ([]schemaPart, error) {
	la, err := ledger.AppliedMigrations(ctx, db)
	if err != nil {
		return nil, err
	}
	ha, err := holds.AppliedMigrations(ctx, db)
	if err != nil {
		return nil, err
	}
	return []schemaPart{{"ledger", migrationNames(ledger.Migrations()), la}, {"holds", migrationNames(holds.Migrations()), ha}}, nil
}

// migrationNames returns the names of the .sql files of migrations, in
// order.
func migrationNames(migrations fs.FS) []string {
	names, _ := fs.Glob(migrations, "*.sql") // the pattern is valid
	return names                             // sorted by fs.Glob
}

// versions renders the schema version of each part, of the database
// (database) or of this build.
func versions(parts []schemaPart, database bool) string {
	var out []string
	for _, p := range parts {
		names := p.known
		if database {
			names = p.applied
		}
		out = append(out, fmt.Sprintf("%s %d", p.name, version(names)))
	}
	return strings.Join(out, ", ")
}

// errNewerSchema marks a database written by a newer svc.
var errNewerSchema = errors.New("database written by a newer svc")

// checkNewer refuses a schema with migrations this build does not know,
// naming both versions.
func checkNewer(path string, parts []schemaPart) error {
	var unknown []string
	for _, p := range parts {
		unknown = append(unknown, p.newer()...)
	}
	if len(unknown) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s has schema %s (migrations %s), this svc %s knows schema %s: run the newer svc or restore a backup taken before the upgrade",
		errNewerSchema, path, versions(parts, true), strings.Join(unknown, ", "), Version, versions(parts, false))
}

// checkSchema refuses (exit 2) the existing database at path if a newer
// svc wrote it; migrations would otherwise run an old schema over a new
// one. A missing file passes: Open creates it.
func checkSchema(ctx context.Context, path string) error {
	if path == "" {
		return nil
	}
	if ok, err := ledger.Exists(path); err != nil || !ok {
		return err
	}
	db, err := ledger.OpenReadOnly(ctx, path)
	if err != nil {
		return err
	}
	defer db.Close()
	parts, err := readSchema(ctx, db)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := checkNewer(path, parts); err != nil {
		return &exitError{code: exitConfig, err: fmt.Errorf("SVC_HOLDS_PATH: %w", err)}
	}
	return nil
}

func newMigrateCommand() *cobra.Command {
	var check bool
	v := newViper(serveDefaults)
	c := &cobra.Command{
		Use:   "migrate",
		Short: "Apply the database migrations of SVC_HOLDS_PATH, or with --check tell whether it needs any",
		Long: "Apply the pending migrations of the engine's database (SVC_HOLDS_PATH), as svc serve does at start,\n" +
			"or with --check only tell whether it needs migrating, without writing to it.\n" + migrateExitHelp,
		Args: argsOf(0, "no argument (the database is SVC_HOLDS_PATH)"),
		RunE: func(c *cobra.Command, _ []string) error {
			p := &parser{v: v}
			path := p.str("holds_path")
			if path == "" {
				return &exitError{code: exitConfig, err: errors.New("SVC_HOLDS_PATH: must name the engine's database")}
			}
			if check {
				return migrateCheck(c.Context(), path, c.OutOrStdout())
			}
			return migrateApply(c.Context(), path, p.durability(), c.OutOrStdout())
		},
	}
	c.Flags().BoolVar(&check, "check", false, "only report whether the database needs migrating (exit 3 if it does)")
	return c
}

// migrateCheck reports the schema of the database at path against this
// build's.
func migrateCheck(ctx context.Context, path string, out io.Writer) error {
	ok, err := ledger.Exists(path)
	if err != nil {
		return failure(err)
	}
	if !ok {
		return failure(fmt.Errorf("SVC_HOLDS_PATH: no database at %s", path))
	}
	db, err := ledger.OpenReadOnly(ctx, path)
	if err != nil {
		return failure(err)
	}
	defer db.Close()
	parts, err := readSchema(ctx, db)
	if err != nil {
		return failure(fmt.Errorf("%s: %w", path, err))
	}
	if err := checkNewer(path, parts); err != nil {
		return &exitError{code: exitConfig, err: err}
	}
	var pending []string
	for _, p := range parts {
		for _, m := range p.pending() {
			pending = append(pending, p.name+"/"+m)
		}
	}
	if len(pending) > 0 {
		fmt.Fprintf(out, "%s: schema %s needs migrating to %s: pending %s (svc serve or svc migrate applies them)\n",
			path, versions(parts, true), versions(parts, false), strings.Join(pending, ", "))
		return &exitError{code: exitPending}
	}
	_, err = fmt.Fprintf(out, "%s: schema %s, up to date\n", path, versions(parts, true))
	return failure(err)
}

// migrateApply applies the pending migrations of the existing database at
// path under the writer lock.
func migrateApply(ctx context.Context, path string, d ledger.Durability, out io.Writer) error {
	if ok, err := ledger.Exists(path); err != nil || !ok {
		return failure(errors.Join(err, fmt.Errorf("SVC_HOLDS_PATH: no database at %s (svc serve creates one)", path)))
	}
	lock, err := lockWriter(path, "SVC_HOLDS_PATH")
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := checkSchema(ctx, path); err != nil {
		return err
	}
	db, err := ledger.Open(ctx, path, d)
	if err != nil {
		return failure(err)
	}
	defer db.Close()
	if _, err := holds.NewStore(ctx, db.SQL()); err != nil {
		return failure(err)
	}
	parts, err := readSchema(ctx, db.SQL())
	if err != nil {
		return failure(err)
	}
	_, err = fmt.Fprintf(out, "%s: schema %s, up to date\n", path, versions(parts, true))
	return failure(err)
}
