package cmd

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/ledger"
)

// checkFreshDatabase refuses (exit 2) to start on a database that Open
// would create when the audit log already holds decisions, unless --init
// says that is intended: the database that held those decisions' holds,
// budget charges and freeze flag is missing (moved away, on a volume that
// was not mounted, a typo in SVC_HOLDS_PATH), and starting afresh would
// forget every pending approval and spent budget. An ephemeral database
// (no SVC_HOLDS_PATH) is fresh at every start by design.
func checkFreshDatabase(cfg Config) error {
	if cfg.Init || cfg.HoldsPath == "" || cfg.AuditLog == "" {
		return nil
	}
	exists, err := ledger.Exists(cfg.HoldsPath)
	if err != nil || exists {
		return err // Open reports a path it cannot stat
	}
	held, err := holdsDecisions(cfg.AuditLog)
	if err != nil || !held {
		return nil // an audit log that cannot be read fails its own opening
	}
	return &exitError{code: 2, err: fmt.Errorf("refusing to create a fresh database at SVC_HOLDS_PATH=%q: the audit log SVC_AUDIT_LOG=%q already holds decisions, "+
		"so the database holding their holds, budget charges and freeze state is missing; restore it, or start once with --init to begin afresh",
		cfg.HoldsPath, cfg.AuditLog)}
}

// holdsDecisions reports whether the JSONL file at path holds a decision
// record; a missing file holds none. It reads up to the first one.
func holdsDecisions(path string) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer func() { _ = f.Close() }()
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			line, err = skipLine(r, line)
		}
		var rec struct {
			Event string `json:"event"`
		}
		if json.Unmarshal(line, &rec) == nil && rec.Event == engine.EventDecision {
			return true, nil
		}
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
}

// skipLine reads past the rest of a line longer than the reader's buffer
// (1 MiB), whose start is head, and returns head: no decision record is
// that long (its strings are bounded), so the line is some other record.
func skipLine(r *bufio.Reader, head []byte) ([]byte, error) {
	head = append([]byte(nil), head...)
	for {
		_, err := r.ReadSlice('\n')
		if !errors.Is(err, bufio.ErrBufferFull) {
			return head, err
		}
	}
}
