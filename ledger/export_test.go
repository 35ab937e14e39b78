package ledger

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/svc-dev/svc/engine"
)

// Totals returns the counted totals of a session since since, for the
// tests written before budgets had scopes and money.
func (b *Budgets) Totals(ctx context.Context, session string, since time.Time) (engine.Totals, error) {
	u, err := b.Usage(ctx, engine.ScopeSession, session, since)
	return u.Totals, err
}

// LogBuffer is a log sink that the audit log's leader and a test may share,
// for the tests of this package, internal and external.
type LogBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write implements io.Writer.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything logged so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Count returns how many times s was logged.
func (l *LogBuffer) Count(s string) int { return strings.Count(l.String(), s) }
