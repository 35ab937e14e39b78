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

// splitFlushes separates the flush requests of batch from its records.
func splitFlushes(batch []*entry) (records, flushes []*entry) {
	for _, e := range batch {
		if e.flush {
			flushes = append(flushes, e)
		} else {
			records = append(records, e)
		}
	}
	return records, flushes
}

// flush puts on disk everything committed so far: the JSONL lines and the
// database's write-ahead log. A failure is logged when it starts and when it
// ends; until a flush succeeds again, batches are refused (unflushed), so
// svc denies rather than answer decisions it may be unable to keep.
func (a *Audit) flush() error {
	var err error
	if a.file != nil {
		err = a.file.flush()
	}
	err = errors.Join(err, a.db.syncWAL())
	switch {
	case err != nil && a.flushErr == nil:
		a.log.Error().Err(err).Msg("audit log: flush to disk failed; decisions are denied until a flush succeeds")
	case err == nil && a.flushErr != nil:
		a.log.Warn().Msg("audit log: flush to disk succeeds again; decisions are answered")
	}
	a.flushErr = err
	return err
}

// unflushed retries the flush that last failed, if any, and reports whether
// the audit log is still unable to flush.
func (a *Audit) unflushed() error {
	if a.flushErr == nil {
		return nil
	}
	if err := a.flush(); err != nil {
		return fmt.Errorf("audit log not flushed to disk: %w", err)
	}
	return nil
}
