package ledger

import (
	"strings"
	"sync"
)

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
