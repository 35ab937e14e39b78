package holds

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/svc-dev/svc/engine"
)

// Page size bounds of List (spec §4.2, §8).
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// statusAll is the list filter that selects every hold, statusSettled the
// one that selects every hold no longer pending (as of the listing).
const (
	statusAll     = "all"
	statusSettled = "settled"
)

// maxCursorLen bounds a cursor before any decoding is attempted.
const maxCursorLen = 1024

var cursorEncoding = base64.RawURLEncoding.Strict()

// cursor is the position after which the next page starts, bound to the
// status filter it was issued for.
type cursor struct {
	Status  string `json:"s"`
	Created int64  `json:"c"`
	ID      string `json:"i"`
	Newest  bool   `json:"n,omitempty"` // issued for a newest-first listing
}

// MaxPageBytes bounds the JSON of the holds of one page: a page ends
// before the hold that would take it past MaxPageBytes, and always holds
// one hold at least, so that a listing of large holds costs memory in
// proportion to this bound rather than to the page size times the size of
// a hold. The page's next_cursor continues where it ended.
const MaxPageBytes = 1 << 20

// List returns one page of holds in created time, then id order (newest
// first with q.Newest), as of q.Now: at most q.Limit holds, and fewer when
// their JSON would pass MaxPageBytes. Status is one of the hold statuses,
// "settled" (every status but pending), "all" or "" (no filter); Limit 0
// means DefaultLimit; Cursor is a NextCursor this Store issued for the same
// status filter and order. Anything else is an invalid_request
// error naming the field. Cursors are signed with a key that lives as long
// as the Store.
func (s *Store) List(ctx context.Context, q engine.HoldQuery) (engine.HoldPage, error) {
	page := engine.HoldPage{Items: []engine.Hold{}}
	next, err := s.page(ctx, q, func(h engine.Hold, _ []byte) { page.Items = append(page.Items, h) })
	if err != nil {
		return engine.HoldPage{}, err
	}
	page.Count, page.NextCursor = len(page.Items), next
	return page, nil
}

// ListJSON returns the page List would, as the JSON of an engine.HoldPage:
// the holds are read from the database, decoded and encoded one at a time,
// so the page costs its own JSON, at most MaxPageBytes and one hold.
func (s *Store) ListJSON(ctx context.Context, q engine.HoldQuery) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(`{"items":[`)
	n := 0
	next, err := s.page(ctx, q, func(_ engine.Hold, raw []byte) {
		if n > 0 {
			buf.WriteByte(',')
		}
		buf.Write(raw)
		n++
	})
	if err != nil {
		return nil, err
	}
	tail, _ := json.Marshal(struct { // an int and a string pointer always marshal
		Count      int     `json:"count"`
		NextCursor *string `json:"next_cursor"`
	}{n, next})
	buf.WriteString("],")
	buf.Write(tail[1:])
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}

// page reads one page of the listing q, calling emit with each hold and
// its JSON in order, and returns the cursor of the next page, nil at the
// end of the listing (see List).
func (s *Store) page(ctx context.Context, q engine.HoldQuery, emit func(h engine.Hold, raw []byte)) (*string, error) {
	status, limit, err := validateQuery(q)
	if err != nil {
		return nil, fmt.Errorf("list holds: %w", err)
	}
	after := cursor{Status: status, Created: math.MinInt64, Newest: q.Newest}
	if q.Newest {
		after.Created = math.MaxInt64
	}
	if q.Cursor != "" {
		if after, err = s.decodeCursor(q.Cursor, status, q.Newest); err != nil {
			return nil, fmt.Errorf("list holds: %w", err)
		}
	}
	now := q.Now
	if now.IsZero() {
		now = time.Now()
	}
	filter, args := statusFilter(status, now.UnixMilli())
	args = append(args, after.Created, after.Created, after.ID, limit+1)
	order := ` AND (created_ms > ? OR (created_ms = ? AND id > ?)) ORDER BY created_ms, id LIMIT ?`
	if q.Newest {
		order = ` AND (created_ms < ? OR (created_ms = ? AND id < ?)) ORDER BY created_ms DESC, id DESC LIMIT ?`
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+holdColumns+` FROM holds WHERE `+filter+order, args...)
	if err != nil {
		return nil, fmt.Errorf("list holds: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var last *engine.Hold
	n, size := 0, 0
	for rows.Next() {
		if n == limit {
			return s.nextCursor(status, q.Newest, last), nil
		}
		h, err := scanHold(rows, now)
		if err != nil {
			return nil, fmt.Errorf("list holds: %w", err)
		}
		raw, err := json.Marshal(h)
		if err != nil {
			return nil, fmt.Errorf("list holds: encode hold %s: %w", h.ID, err)
		}
		if n > 0 && size+len(raw) > MaxPageBytes {
			return s.nextCursor(status, q.Newest, last), nil
		}
		emit(h, raw)
		last, n, size = &h, n+1, size+len(raw)+1
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list holds: %w", err)
	}
	return nil, nil
}

// nextCursor is the cursor of the page after the one that ends with last.
func (s *Store) nextCursor(status string, newest bool, last *engine.Hold) *string {
	next := s.encodeCursor(cursor{Status: status, Created: last.CreatedTS.UnixMilli(), ID: last.ID, Newest: newest})
	return &next
}

func validateQuery(q engine.HoldQuery) (string, int, error) {
	status := q.Status
	switch status {
	case "":
		status = statusAll
	case statusAll, statusSettled, engine.HoldPending, engine.HoldApproved, engine.HoldRejected,
		engine.HoldExpired, engine.HoldConsumed:
	default:
		return "", 0, engine.InvalidField("status", engine.HoldStatusReason)
	}
	limit := q.Limit
	if limit == 0 {
		limit = DefaultLimit
	}
	if limit < 1 || limit > MaxLimit {
		return "", 0, engine.InvalidField("limit", fmt.Sprintf("must be an integer from 1 to %d", MaxLimit))
	}
	return status, limit, nil
}

// statusFilter selects holds by their status as of now, so a lapsed
// pending or approved hold is listed as expired, never as pending.
func statusFilter(status string, nowMS int64) (string, []any) {
	switch status {
	case statusAll:
		return "1 = 1", nil
	case statusSettled:
		return "NOT (status = 'pending' AND expires_ms > ?)", []any{nowMS}
	case engine.HoldPending, engine.HoldApproved:
		return "status = ? AND expires_ms > ?", []any{status, nowMS}
	case engine.HoldExpired:
		return "(status = 'expired' OR (status IN ('pending', 'approved') AND expires_ms <= ?))", []any{nowMS}
	}
	return "status = ?", []any{status}
}

func (s *Store) sign(payload []byte) []byte {
	mac := hmac.New(sha256.New, s.key)
	mac.Write(payload)
	return mac.Sum(nil)
}

func (s *Store) encodeCursor(c cursor) string {
	payload, _ := json.Marshal(c) // strings and an int64 always encode
	return cursorEncoding.EncodeToString(payload) + "." + cursorEncoding.EncodeToString(s.sign(payload))
}

func (s *Store) decodeCursor(raw, status string, newest bool) (cursor, error) {
	forged := engine.InvalidField("cursor", "not a cursor issued by this server, or altered")
	if len(raw) > maxCursorLen {
		return cursor{}, forged
	}
	body, sig, ok := strings.Cut(raw, ".")
	if !ok {
		return cursor{}, forged
	}
	payload, err := cursorEncoding.DecodeString(body)
	if err != nil {
		return cursor{}, forged
	}
	mac, err := cursorEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(mac, s.sign(payload)) {
		return cursor{}, forged
	}
	var c cursor
	if err := json.Unmarshal(payload, &c); err != nil {
		return cursor{}, forged
	}
	if c.Status != status {
		return cursor{}, engine.InvalidField("cursor", fmt.Sprintf("issued for status %q, not %q", c.Status, status))
	}
	if c.Newest != newest {
		return cursor{}, engine.InvalidField("cursor", fmt.Sprintf("issued for order %s, not %s", orderName(c.Newest), orderName(newest)))
	}
	return c, nil
}

// CountByStatus counts holds by their status as of now (a lapsed pending or
// approved hold counts as expired), for the metrics scrape.
func (s *Store) CountByStatus(ctx context.Context, now time.Time) (map[string]int, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT CASE WHEN status IN ('pending', 'approved') AND expires_ms <= ?
		THEN 'expired' ELSE status END AS st, COUNT(*) FROM holds GROUP BY st`, now.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("count holds: %w", err)
	}
	defer func() { _ = rows.Close() }()
	counts := map[string]int{}
	for rows.Next() {
		var status string
		var n int
		if err := rows.Scan(&status, &n); err != nil {
			return nil, fmt.Errorf("count holds: %w", err)
		}
		counts[status] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count holds: %w", err)
	}
	return counts, nil
}

// orderName is the name of a listing order, as the order parameter of
// GET /v1/holds spells it.
func orderName(newest bool) string {
	if newest {
		return engine.OrderNewest
	}
	return engine.OrderOldest
}
