package holds

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
)

func TestListPagesEachHoldOnceInOrder(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	// 250 holds inserted in random order; three share each created
	// millisecond, so the id breaks ties.
	want := make([]engine.Hold, 250)
	for i := range want {
		want[i] = newHold(seqID(i), t0.Add(time.Duration(i/3)*time.Millisecond))
	}
	shuffled := append([]engine.Hold(nil), want...)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) {
		shuffled[i], shuffled[j] = shuffled[j], shuffled[i]
	})
	mustCreate(t, s, shuffled...)

	var got []string
	q := engine.HoldQuery{Status: "all", Limit: 7, Now: t0}
	for pages := 1; ; pages++ {
		page, err := s.List(ctx, q)
		require.NoError(t, err)
		require.Equal(t, len(page.Items), page.Count)
		got = append(got, holdIDs(page.Items)...)
		if page.NextCursor == nil {
			require.Equal(t, 36, pages)
			require.Equal(t, 250-35*7, page.Count)
			break
		}
		require.Equal(t, 7, page.Count)
		q.Cursor = *page.NextCursor
	}
	require.Equal(t, holdIDs(want), got)
}

func TestListStatusFilter(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	by := engine.Principal{Type: TypeHuman, ID: "alice"}
	mustCreate(t, s, newHold("pending", t0), newHold("approved", t0), newHold("rejected", t0),
		newHold("consumed", t0), newHold("lapsed", t0.Add(-2*time.Hour)), newHold("lapsed-approved", t0.Add(-59*time.Minute)))
	for id, st := range map[string]string{"approved": engine.HoldApproved, "rejected": engine.HoldRejected,
		"consumed": engine.HoldApproved, "lapsed-approved": engine.HoldApproved} {
		_, err := s.Resolve(ctx, id, engine.HoldResolution{Status: st, By: by, At: t0})
		require.NoError(t, err)
	}
	_, err := s.Consume(ctx, "consumed", "d", t0)
	require.NoError(t, err)

	now := t0.Add(time.Minute) // lapsed-approved expired a minute ago
	tests := map[string][]string{
		"":                  {"lapsed", "lapsed-approved", "approved", "consumed", "pending", "rejected"},
		"all":               {"lapsed", "lapsed-approved", "approved", "consumed", "pending", "rejected"},
		engine.HoldPending:  {"pending"},
		engine.HoldApproved: {"approved"},
		engine.HoldRejected: {"rejected"},
		engine.HoldConsumed: {"consumed"},
		engine.HoldExpired:  {"lapsed", "lapsed-approved"},
		"settled":           {"lapsed", "lapsed-approved", "approved", "consumed", "rejected"},
	}
	for status, want := range tests {
		t.Run("status="+status, func(t *testing.T) {
			page, err := s.List(ctx, engine.HoldQuery{Status: status, Now: now})
			require.NoError(t, err)
			require.Equal(t, want, holdIDs(page.Items))
			require.Nil(t, page.NextCursor)
			for _, h := range page.Items {
				if status != "" && status != "all" && status != "settled" {
					require.Equal(t, status, h.Status)
				}
			}
		})
	}
}

// TestListNewestFirst pages the listing newest first: every hold once,
// in the reverse of the oldest-first order, and a cursor of one order is
// refused by the other.
func TestListNewestFirst(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	var oldest []string
	for i := range 20 {
		h := newHold(seqID(i), t0.Add(time.Duration(i/3)*time.Millisecond))
		mustCreate(t, s, h)
		oldest = append(oldest, h.ID)
	}
	var got []string
	q := engine.HoldQuery{Status: "all", Limit: 3, Newest: true, Now: t0}
	for {
		page, err := s.List(ctx, q)
		require.NoError(t, err)
		got = append(got, holdIDs(page.Items)...)
		if page.NextCursor == nil {
			break
		}
		q.Cursor = *page.NextCursor
	}
	slices.Reverse(oldest)
	require.Equal(t, oldest, got)

	page, err := s.List(ctx, engine.HoldQuery{Status: "all", Limit: 3, Newest: true, Now: t0})
	require.NoError(t, err)
	_, err = s.List(ctx, engine.HoldQuery{Status: "all", Limit: 3, Cursor: *page.NextCursor, Now: t0})
	requireErr(t, err, &engine.Error{Code: engine.EINVALID}, map[string]any{"field": "cursor",
		"reason": "issued for order newest, not oldest"})
}

func TestListEmptyAndDefaultLimit(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	page, err := s.List(ctx, engine.HoldQuery{Now: t0})
	require.NoError(t, err)
	body, err := json.Marshal(page)
	require.NoError(t, err)
	require.JSONEq(t, `{"items": [], "count": 0, "next_cursor": null}`, string(body))

	for i := range 150 {
		mustCreate(t, s, newHold(seqID(i), t0))
	}
	page, err = s.List(ctx, engine.HoldQuery{Limit: 0, Now: t0})
	require.NoError(t, err)
	require.Equal(t, DefaultLimit, page.Count)
	require.NotNil(t, page.NextCursor)
	page, err = s.List(ctx, engine.HoldQuery{Limit: MaxLimit, Now: t0})
	require.NoError(t, err)
	require.Equal(t, 150, page.Count)
	require.Nil(t, page.NextCursor)
}

func TestListRefusesBadQueries(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	other := newTestStore(t)
	for i := range 5 {
		mustCreate(t, s, newHold(seqID(i), t0))
		mustCreate(t, other, newHold(seqID(i), t0))
	}
	pendingCursor := firstCursor(t, s, engine.HoldPending)
	allCursor := firstCursor(t, s, "")
	body, sig, _ := strings.Cut(pendingCursor, ".")

	// A cursor re-encoded with a later position but the original signature.
	payload, err := cursorEncoding.DecodeString(body)
	require.NoError(t, err)
	edited := cursorEncoding.EncodeToString([]byte(strings.Replace(string(payload), seqID(1), seqID(3), 1))) + "." + sig
	require.NotEqual(t, pendingCursor, edited)

	tests := []struct {
		name  string
		q     engine.HoldQuery
		field string
	}{
		{"unknown status", engine.HoldQuery{Status: "open"}, "status"},
		{"status not lower case", engine.HoldQuery{Status: "PENDING"}, "status"},
		{"status All", engine.HoldQuery{Status: "All"}, "status"},
		{"negative limit", engine.HoldQuery{Limit: -1}, "limit"},
		{"limit above max", engine.HoldQuery{Limit: MaxLimit + 1}, "limit"},
		{"garbage cursor", engine.HoldQuery{Cursor: "not-a-cursor"}, "cursor"},
		{"cursor without signature", engine.HoldQuery{Status: engine.HoldPending, Cursor: body}, "cursor"},
		{"edited cursor", engine.HoldQuery{Status: engine.HoldPending, Cursor: edited}, "cursor"},
		{"cursor of another status", engine.HoldQuery{Status: engine.HoldApproved, Cursor: pendingCursor}, "cursor"},
		{"pending cursor under all", engine.HoldQuery{Cursor: pendingCursor}, "cursor"},
		{"all cursor under pending", engine.HoldQuery{Status: engine.HoldPending, Cursor: allCursor}, "cursor"},
		{"oversized cursor", engine.HoldQuery{Cursor: strings.Repeat("A", maxCursorLen+1)}, "cursor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.q.Now = t0
			page, err := s.List(ctx, tt.q)
			requireErr(t, err, &engine.Error{Code: engine.EINVALID}, map[string]any{"field": tt.field})
			require.Empty(t, page.Items, "never a default result")
		})
	}

	t.Run("cursor of another store", func(t *testing.T) {
		_, err := other.List(ctx, engine.HoldQuery{Status: engine.HoldPending, Cursor: pendingCursor, Now: t0})
		requireErr(t, err, &engine.Error{Code: engine.EINVALID}, map[string]any{"field": "cursor"})
	})
	t.Run("all and empty status share cursors", func(t *testing.T) {
		page, err := s.List(ctx, engine.HoldQuery{Status: "all", Limit: 2, Cursor: allCursor, Now: t0})
		require.NoError(t, err)
		require.Equal(t, []string{seqID(2), seqID(3)}, holdIDs(page.Items))
	})
}

// firstCursor returns the next cursor of a first page of two holds.
func firstCursor(t *testing.T, s *Store, status string) string {
	t.Helper()
	page, err := s.List(context.Background(), engine.HoldQuery{Status: status, Limit: 2, Now: t0})
	require.NoError(t, err)
	require.NotNil(t, page.NextCursor)
	ids := holdIDs(page.Items)
	require.True(t, sort.StringsAreSorted(ids))
	assert.Equal(t, []string{seqID(0), seqID(1)}, ids)
	return *page.NextCursor
}

// TestListCursorSurvivesRestart: the cursor key belongs to the database, so
// a cursor issued before a restart (a new Store on the same database) reads
// on where it left off.
func TestListCursorSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	before, err := NewStore(ctx, db)
	require.NoError(t, err)
	for i := range 5 {
		mustCreate(t, before, newHold(seqID(i), t0))
	}
	cursor := firstCursor(t, before, engine.HoldPending)

	after, err := NewStore(ctx, db)
	require.NoError(t, err)
	assert.Equal(t, before.key, after.key)
	page, err := after.List(ctx, engine.HoldQuery{Status: engine.HoldPending, Limit: 2, Cursor: cursor, Now: t0})
	require.NoError(t, err)
	assert.Equal(t, []string{seqID(2), seqID(3)}, holdIDs(page.Items))
}

// TestListCapsAPageInBytes lists holds of about 300 KB each: a page ends
// before the hold that would take its JSON past MaxPageBytes, its cursor
// continues there, and the pages together hold every hold once; ListJSON
// is List encoded.
func TestListCapsAPageInBytes(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	const n, each = 12, 300 << 10
	want := make([]engine.Hold, n)
	for i := range want {
		want[i] = newHold(seqID(i), t0.Add(time.Duration(i)*time.Millisecond))
		want[i].Envelope.Params = map[string]any{"blob": strings.Repeat("x", each)}
	}
	mustCreate(t, s, want...)

	var got []string
	q := engine.HoldQuery{Status: "all", Limit: MaxLimit, Now: t0}
	for {
		raw, err := s.ListJSON(ctx, q)
		require.NoError(t, err)
		require.LessOrEqual(t, len(raw), MaxPageBytes+100, "the page's JSON stays within the bound")
		var page engine.HoldPage
		require.NoError(t, json.Unmarshal(raw, &page))
		typed, err := s.List(ctx, q)
		require.NoError(t, err)
		require.Equal(t, mustMarshal(t, typed), mustMarshal(t, page), "ListJSON is List encoded")
		require.Equal(t, MaxPageBytes/each, page.Count, "as many holds as fit")
		got = append(got, holdIDs(page.Items)...)
		if page.NextCursor == nil {
			break
		}
		q.Cursor = *page.NextCursor
	}
	require.Equal(t, holdIDs(want), got)

	huge := newHold("huge", t0.Add(time.Hour))
	huge.Envelope.Params = map[string]any{"blob": strings.Repeat("y", MaxPageBytes+1)}
	mustCreate(t, s, huge)
	page, err := s.List(ctx, engine.HoldQuery{Status: "all", Limit: MaxLimit, Cursor: q.Cursor, Now: t0})
	require.NoError(t, err)
	require.Equal(t, []string{"h-0009", "h-0010", "h-0011"}, holdIDs(page.Items), "the huge hold does not fit after them")
	require.NotNil(t, page.NextCursor)
	page, err = s.List(ctx, engine.HoldQuery{Status: "all", Limit: MaxLimit, Cursor: *page.NextCursor, Now: t0})
	require.NoError(t, err)
	require.Equal(t, []string{"huge"}, holdIDs(page.Items), "a hold larger than the bound is a page of its own")
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	return string(raw)
}
