package holds

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/svc-dev/svc/database"
	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/envelope"
)

// Store is the SQLite hold store. It shares svc's one database with the
// ledger and owns only its holds and holds_migrations tables. The database
// handle belongs to the caller, so a Store has nothing to close.
type Store struct {
	db  *sql.DB
	key []byte // HMAC key of list cursors, random per database
	pg  bool   // db is PostgreSQL, shared by replicas (database.IsPostgres)
}

var _ engine.Holds = (*Store)(nil)

// cursorKeyBytes is the size of the cursor HMAC key.
const cursorKeyBytes = 32

// NewStore runs the hold migrations on db and returns a Store over it.
func NewStore(ctx context.Context, db *sql.DB) (*Store, error) {
	if db == nil {
		return nil, errors.New("new holds store: nil database")
	}
	pg := database.IsPostgres(db)
	key, err := migrate(ctx, db, pg)
	if err != nil {
		return nil, fmt.Errorf("new holds store: %w", err)
	}
	return &Store{db: db, key: key, pg: pg}, nil
}

// cursorKey returns the database's cursor key, drawing it on first use.
func cursorKey(ctx context.Context, db querier) ([]byte, error) {
	fresh := make([]byte, cursorKeyBytes)
	if _, err := rand.Read(fresh); err != nil {
		return nil, err
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO holds_cursor_key (id, key) VALUES (1, ?)
		ON CONFLICT (id) DO NOTHING`, fresh); err != nil {
		return nil, err
	}
	var key []byte
	if err := db.QueryRowContext(ctx, `SELECT key FROM holds_cursor_key WHERE id = 1`).Scan(&key); err != nil {
		return nil, err
	}
	return key, nil
}

// holdColumns are the columns scanHold reads, in its order.
const holdColumns = `id, status, rule, reason, envelope, envelope_hash, params_hash, gate,
	created_ms, expires_ms, decided_by_type, decided_by_id, decided_ms, decided_verified,
	resolution_reason, consumed_ms, decision_id, consumed_by_decision_id`

// querier is what the store's statements run on: the database, or the
// transaction of a decision's audit batch.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// CreateIn persists a new pending hold in tx, the transaction that records
// the decision raising it, unless a live hold of the same binding
// (engine.HoldBinding) exists as of its creation: that is refused with an
// error matching engine.ErrIdenticalHold naming the live hold, and nothing
// is written. A hold with the same id is ErrExists; a hold without id,
// rule, envelope or a future expiry is invalid.
//
// On PostgreSQL, where replicas create holds concurrently, the binding's
// advisory lock, held until tx ends, makes the check and the insert one
// step, as SQLite's single writer does.
func (s *Store) CreateIn(ctx context.Context, tx *sql.Tx, h engine.Hold) error {
	if binding := engine.HoldBinding(&h); s.pg && binding != "" {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, database.LockKey("hold/"+binding)); err != nil {
			return fmt.Errorf("create hold %s: lock its binding: %w", h.ID, err)
		}
	}
	return create(ctx, tx, h)
}

func create(ctx context.Context, q querier, h engine.Hold) error {
	if err := validateNew(h); err != nil {
		return fmt.Errorf("create hold %s: %w", h.ID, err)
	}
	env, err := json.Marshal(h.Envelope)
	if err != nil {
		return fmt.Errorf("create hold %s: encode envelope: %w", h.ID, err)
	}
	a, binding := h.Envelope.Agent, engine.HoldBinding(&h)
	res, err := q.ExecContext(ctx, `INSERT INTO holds (id, status, rule, reason, envelope,
		envelope_hash, params_hash, gate, agent_id, on_behalf_of, session_id, created_ms, expires_ms,
		decision_id, binding) SELECT ?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?, ?, CAST(? AS BIGINT),
		CAST(? AS BIGINT), ?, ?
		WHERE NOT EXISTS (SELECT 1 FROM holds WHERE `+liveHold+`) ON CONFLICT (id) DO NOTHING`,
		h.ID, h.Rule, h.Reason, string(env), h.EnvelopeHash, h.ParamsHash, h.Gate, a.ID, a.OnBehalfOf,
		a.SessionID, h.CreatedTS.UnixMilli(), h.ExpiresTS.UnixMilli(), h.DecisionID, nullable(binding),
		binding, h.CreatedTS.UnixMilli())
	if err != nil {
		return fmt.Errorf("create hold %s: %w", h.ID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("create hold %s: %w", h.ID, err)
	}
	if n == 1 {
		return nil
	}
	switch live, err := reusable(ctx, q, binding, h.CreatedTS); {
	case err == nil:
		return fmt.Errorf("create hold %s: %w", h.ID, derive(engine.ErrIdenticalHold,
			"hold "+live.ID+" is bound to the same action and actor", map[string]any{"hold_id": live.ID}))
	case !errors.Is(err, ErrNotFound):
		return fmt.Errorf("create hold %s: %w", h.ID, err)
	}
	return fmt.Errorf("create hold %s: %w", h.ID,
		derive(ErrExists, "a hold with this id exists", map[string]any{"hold_id": h.ID}))
}

// liveHold is the condition, on a binding and a time in Unix
// milliseconds, of the hold that a require_approval of that binding reuses
// at that time: pending, or approved (and so not consumed), and unexpired.
const liveHold = `binding = ? AND status IN ('pending', 'approved') AND expires_ms > ?`

// Reusable returns the live hold of binding as of now (see engine.Holds):
// an approved one first, then the newest. None, or an empty binding, is
// ErrNotFound.
func (s *Store) Reusable(ctx context.Context, binding string, now time.Time) (engine.Hold, error) {
	return reusable(ctx, s.db, binding, now)
}

func reusable(ctx context.Context, q querier, binding string, now time.Time) (engine.Hold, error) {
	if binding == "" {
		return engine.Hold{}, notFound("")
	}
	hs, err := queryHolds(ctx, q, now, `SELECT `+holdColumns+` FROM holds WHERE `+liveHold+`
		ORDER BY status = 'approved' DESC, created_ms DESC, id DESC LIMIT 1`, binding, now.UnixMilli())
	switch {
	case err != nil:
		return engine.Hold{}, fmt.Errorf("find reusable hold: %w", err)
	case len(hs) == 0:
		return engine.Hold{}, notFound("")
	}
	return hs[0], nil
}

// nullable is s, or NULL when s is empty.
func nullable(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

func validateNew(h engine.Hold) error {
	switch {
	case strings.TrimSpace(h.ID) == "":
		return engine.InvalidField("id", "a hold needs an id")
	case h.Status != "" && h.Status != engine.HoldPending:
		return engine.InvalidField("status", "a new hold is pending")
	case h.Rule == "":
		return engine.InvalidField("rule", "a hold needs the rule that created it")
	case h.Envelope == nil:
		return engine.InvalidField("envelope", "a hold needs its envelope")
	case !h.ExpiresTS.After(h.CreatedTS):
		return engine.InvalidField("expires_ts", "a hold must expire after it is created")
	}
	return nil
}

// Get returns the hold with id as of now: a pending or approved hold whose
// expiry has passed is reported expired. An unknown id is ErrNotFound.
func (s *Store) Get(ctx context.Context, id string, now time.Time) (engine.Hold, error) {
	return get(ctx, s.db, id, now)
}

func get(ctx context.Context, q querier, id string, now time.Time) (engine.Hold, error) {
	row := q.QueryRowContext(ctx, `SELECT `+holdColumns+` FROM holds WHERE id = ?`, id)
	h, err := scanHold(row, now)
	if errors.Is(err, sql.ErrNoRows) {
		return engine.Hold{}, fmt.Errorf("get hold %s: %w", id, notFound(id))
	}
	if err != nil {
		return engine.Hold{}, fmt.Errorf("get hold %s: %w", id, err)
	}
	return h, nil
}

// queryHolds runs a SELECT or an UPDATE ... RETURNING of holdColumns and
// reads every row, so an UPDATE has completed and committed on return.
func queryHolds(ctx context.Context, q querier, now time.Time, query string, args ...any) ([]engine.Hold, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []engine.Hold
	for rows.Next() {
		h, err := scanHold(rows, now)
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

type scanner interface{ Scan(dest ...any) error }

func scanHold(sc scanner, now time.Time) (engine.Hold, error) {
	var (
		h                 engine.Hold
		env               string
		created, expires  int64
		byType, byID, cby sql.NullString
		decided, consumed sql.NullInt64
		verified          sql.NullBool
	)
	err := sc.Scan(&h.ID, &h.Status, &h.Rule, &h.Reason, &env, &h.EnvelopeHash, &h.ParamsHash, &h.Gate,
		&created, &expires, &byType, &byID, &decided, &verified, &h.ResolutionReason,
		&consumed, &h.DecisionID, &cby)
	if err != nil {
		return engine.Hold{}, err
	}
	if h.Envelope, err = decodeEnvelope(env); err != nil {
		return engine.Hold{}, fmt.Errorf("decode envelope of hold %s: %w", h.ID, err)
	}
	h.CreatedTS, h.ExpiresTS = fromMS(created), fromMS(expires)
	if byType.Valid {
		h.DecidedBy = &engine.Principal{Type: byType.String, ID: byID.String}
	}
	h.DecidedTS, h.ConsumedTS = optionalTime(decided), optionalTime(consumed)
	if verified.Valid {
		v := verified.Bool
		h.DecidedByVerified = &v
	}
	h.ConsumedBy = cby.String
	h.Status = effectiveStatus(h.Status, expires, now)
	return h, nil
}

// decodeEnvelope decodes a stored envelope with the numbers of params and
// context as json.Number, as ParseEnvelope gave them: the approver is shown
// each number exactly as the agent sent it, not as a float64 reads it
// (9007199254740993 would read as 9007199254740992).
func decodeEnvelope(stored string) (*envelope.Envelope, error) {
	dec := json.NewDecoder(strings.NewReader(stored))
	dec.UseNumber()
	env := new(envelope.Envelope)
	if err := dec.Decode(env); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the envelope")
	}
	return env, nil
}

// effectiveStatus is the status as of now: a pending or approved hold whose
// expiry has been reached is expired whether or not a sweep recorded it.
func effectiveStatus(status string, expiresMS int64, now time.Time) string {
	lapsed := expiresMS <= now.UnixMilli()
	if lapsed && (status == engine.HoldPending || status == engine.HoldApproved) {
		return engine.HoldExpired
	}
	return status
}

func fromMS(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

func optionalTime(ms sql.NullInt64) *time.Time {
	if !ms.Valid {
		return nil
	}
	t := fromMS(ms.Int64)
	return &t
}

func sortHolds(hs []engine.Hold) {
	sort.Slice(hs, func(i, j int) bool {
		a, b := hs[i], hs[j]
		if !a.CreatedTS.Equal(b.CreatedTS) {
			return a.CreatedTS.Before(b.CreatedTS)
		}
		return a.ID < b.ID
	})
}

// PruneSettled deletes at most limit holds that are settled for good —
// rejected, expired or consumed, as recorded — and whose every time
// (created, expiry, decision, consumption) is before before. A pending or
// an approved hold is never deleted, whatever its age: the sweep records
// its expiry first. It has the signature of a ledger.PruneBatch.
func PruneSettled(ctx context.Context, tx *sql.Tx, before time.Time, limit int) (int64, error) {
	ms := before.UnixMilli() // positional: PostgreSQL's driver takes no named arguments
	res, err := tx.ExecContext(ctx, `DELETE FROM holds WHERE id IN (
		SELECT id FROM holds WHERE status IN ('rejected', 'expired', 'consumed')
			AND created_ms < ? AND expires_ms < ?
			AND coalesce(decided_ms, 0) < ? AND coalesce(consumed_ms, 0) < ?
		LIMIT ?)`, ms, ms, ms, ms, limit)
	if err != nil {
		return 0, fmt.Errorf("prune settled holds: %w", err)
	}
	return res.RowsAffected()
}
