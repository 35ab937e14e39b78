package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// flushLoop queues a flush request every interval until Close, under
// DurabilityOS. A request rides the next batch like a record, so it is
// carried out within one batch even when batches follow each other without
// pause, and leads a batch of its own when svc is idle.
func (a *Audit) flushLoop(interval time.Duration) {
	defer close(a.stopped)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-t.C:
		}
		// The outcome is logged by the leader that flushed (flush), and a
		// request refused after Close is moot: Close flushes.
		_ = a.submit(context.Background(), &entry{flush: true, done: make(chan signal, 1)})
	}
}

// flush puts on disk everything committed so far: the JSONL lines and the
// database's write-ahead log. A failure sticks: once an fsync has failed,
// the kernel may have dropped the pages it could not write back (or marked
// them clean), so a later fsync that succeeds proves nothing about the
// records already answered. From then on every batch is refused, so svc
// denies, until it is restarted.
func (a *Audit) flush() error {
	if a.flushErr != nil {
		return a.flushErr
	}
	var err error
	if a.file != nil {
		err = a.file.flush()
	}
	if err = errors.Join(err, a.db.syncWAL()); err != nil {
		a.log.Error().Err(err).Msg("audit log: flush to disk failed; every decision is denied until svc is restarted")
		a.flushErr = fmt.Errorf("audit log not flushed to disk: %w", err)
	}
	return a.flushErr
}
