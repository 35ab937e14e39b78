package ledger

import (
	"errors"
	"fmt"
	"time"
)

// flushLoop flushes every interval until Close, under DurabilityOS, beside
// the commits: no batch waits for the flush, which syncs what the batches
// before it wrote.
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
		_ = a.flush() // a failure is logged by flush, and refuses every later batch
	}
}

// flush puts on disk everything committed so far: the JSONL lines and the
// database's write-ahead log. It may run beside the leader. A failure
// sticks: once an fsync has failed, the kernel may have dropped the pages it
// could not write back (or marked them clean), so a later fsync that
// succeeds proves nothing about the records already answered. From then on
// every batch is refused, so svc denies, until it is restarted.
func (a *Audit) flush() error {
	if p := a.flushErr.Load(); p != nil {
		return *p
	}
	var err error
	if a.file != nil {
		a.mu.Lock()
		fsync := a.file.fsync // tests replace it under mu
		a.mu.Unlock()
		err = a.file.syncBeside(fsync)
	}
	if err = errors.Join(err, a.db.syncWAL()); err == nil {
		return nil
	}
	failed := fmt.Errorf("audit log not flushed to disk: %w", err)
	if a.flushErr.CompareAndSwap(nil, &failed) {
		a.log.Error().Err(err).Msg("audit log: flush to disk failed; every decision is denied until svc is restarted")
	}
	return *a.flushErr.Load()
}
