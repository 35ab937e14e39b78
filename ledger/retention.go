package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Retention prunes in small batches, each in a write transaction of its
// own, so that the decision path waits at most for one batch.
const (
	// PruneBatchRows is the most rows one batch deletes.
	PruneBatchRows = 500
	// prunePause separates two batches, leaving the write lock to the
	// decision path.
	prunePause = 20 * time.Millisecond
)

// PruneBatch deletes at most limit rows older than before in tx and
// returns how many it deleted.
type PruneBatch func(ctx context.Context, tx *sql.Tx, before time.Time, limit int) (int64, error)

// Prune runs batch in write transactions of its own, one after the other,
// until one deletes fewer than PruneBatchRows rows, and returns how many
// rows they deleted.
func (db *DB) Prune(ctx context.Context, before time.Time, batch PruneBatch) (int64, error) {
	var total int64
	for {
		var n int64
		err := db.write(ctx, func(tx *sql.Tx) error {
			var err error
			n, err = batch(ctx, tx, before, PruneBatchRows)
			return err
		})
		if err != nil {
			return total, err
		}
		total += n
		if n < PruneBatchRows {
			return total, nil
		}
		select {
		case <-ctx.Done():
			return total, ctx.Err()
		case <-time.After(prunePause):
		}
	}
}

// PruneAudit is the PruneBatch of the audit mirror: rows stamped before
// before, except the newest reconcileRows regular rows and every row after
// them, which the start-up reconciliation with the JSONL file reads
// (reconcile). The JSONL file itself is never touched.
func PruneAudit(ctx context.Context, tx *sql.Tx, before time.Time, limit int) (int64, error) {
	res, err := tx.ExecContext(ctx, `DELETE FROM audit WHERE seq IN (
		SELECT seq FROM audit WHERE ts_ms < ? AND seq < (
			SELECT coalesce(min(seq), 0) FROM (SELECT seq FROM audit WHERE body NOT LIKE '%"degraded":true%'
				ORDER BY seq DESC LIMIT ?) AS newest)
		ORDER BY seq LIMIT ?)`, before.UnixMilli(), reconcileRows, limit)
	if err != nil {
		return 0, fmt.Errorf("prune audit mirror: %w", err)
	}
	return res.RowsAffected()
}
