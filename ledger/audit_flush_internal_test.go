package ledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/database"
)

// fsyncProbe counts the audit file's fsyncs and fails them while failing is
// set. The real file is still synced: only the fault is injected, as a disk
// that fails its flushes cannot be had on demand.
type fsyncProbe struct {
	calls   atomic.Int64
	failing atomic.Bool
	// stall, when set, holds every fsync until it is closed: a flush that
	// takes long, as a sync of 100 ms of writes can on a busy disk.
	stall   atomic.Pointer[chan struct{}]
	stalled atomic.Int64 // fsyncs waiting on stall now
}

func (p *fsyncProbe) fsync(f *os.File) error {
	p.calls.Add(1)
	if ch := p.stall.Load(); ch != nil {
		p.stalled.Add(1)
		<-*ch
		p.stalled.Add(-1)
	}
	if p.failing.Load() {
		return syscall.EIO
	}
	return f.Sync()
}

// probedAudit returns an audit log with the given durability and flush
// interval whose file's fsyncs go through a probe. The probe is installed
// while no batch is in progress, so the flush loop sees it without a race.
func probedAudit(t *testing.T, d Durability, flushEvery time.Duration) (*Audit, *fsyncProbe, string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	db, err := Open(ctx, filepath.Join(dir, "svc.db"), d)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, db.Close()) })
	path := filepath.Join(dir, "audit.jsonl")
	a, err := newAudit(ctx, db, path, nil, zerolog.New(zerolog.NewTestWriter(t)),
		intervals{flush: flushEvery, checkpoint: database.CheckpointInterval})
	require.NoError(t, err)
	probe := &fsyncProbe{}
	a.mu.Lock()
	for a.leading {
		a.idle.Wait()
	}
	a.file.fsync = probe.fsync
	a.mu.Unlock()
	return a, probe, path
}

func recordN(t *testing.T, a *Audit, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		require.NoError(t, a.Record(context.Background(), "decision", map[string]string{"decision_id": fmt.Sprint("d", i)}))
	}
}

// never is a flush interval no test outlives: the loop does not flush.
const never = time.Hour

func TestDurabilityFlushes(t *testing.T) {
	const n = 40
	t.Run("full fsyncs every batch before answering", func(t *testing.T) {
		a, probe, _ := probedAudit(t, DurabilityFull, FlushInterval)
		recordN(t, a, 0, n)
		assert.EqualValues(t, n, probe.calls.Load(), "one fsync per batch of one record")
		require.NoError(t, a.Close())
		assert.EqualValues(t, n, probe.calls.Load(), "nothing is left to flush at Close")
	})
	t.Run("os answers before the flush and Close flushes", func(t *testing.T) {
		a, probe, path := probedAudit(t, DurabilityOS, never)
		recordN(t, a, 0, n)
		body, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, n, bytes.Count(body, []byte("\n")), "every answered record is written to the file at once")
		assert.Zero(t, probe.calls.Load(), "no record waits for an fsync")
		require.NoError(t, a.Close())
		assert.EqualValues(t, 1, probe.calls.Load(), "Close flushes what was written")
	})
	t.Run("os flushes within the interval", func(t *testing.T) {
		a, probe, _ := probedAudit(t, DurabilityOS, 10*time.Millisecond)
		recordN(t, a, 0, 1)
		require.Eventually(t, func() bool { return probe.calls.Load() > 0 },
			5*time.Second, time.Millisecond, "the background flush syncs the line")
		calls := probe.calls.Load()
		time.Sleep(50 * time.Millisecond)
		assert.Equal(t, calls, probe.calls.Load(), "a file with nothing new is not synced again")
	})
}

func TestDurabilityOSFlushFailureDenies(t *testing.T) {
	ctx := context.Background()
	a, probe, path := probedAudit(t, DurabilityOS, 10*time.Millisecond)
	recordN(t, a, 0, 1)
	probe.failing.Store(true)
	recordN(t, a, 1, 1) // written; its flush is what fails

	require.Eventually(t, func() bool {
		return a.Record(ctx, "decision", map[string]string{"decision_id": "until-the-flush-fails"}) != nil
	}, 20*FlushInterval, FlushInterval/10, "once a flush fails, records are refused")
	refused := func(why string) {
		t.Helper()
		for range 3 {
			err := a.Record(ctx, "decision", map[string]string{"decision_id": "refused"})
			require.Error(t, err, why)
			assert.True(t, errors.Is(err, syscall.EIO), "%v", err)
			assert.Contains(t, err.Error(), "not flushed to disk")
		}
	}
	refused("refused once a flush failed")

	// A later fsync that succeeds proves nothing about the pages the failed
	// one could not write: the refusal lasts until restart.
	probe.failing.Store(false)
	time.Sleep(5 * 10 * time.Millisecond)
	refused("still refused after the disk answers again")
	calls := probe.calls.Load()
	time.Sleep(5 * 10 * time.Millisecond)
	assert.Equal(t, calls, probe.calls.Load(), "a failed audit log is not fsynced again by the loop")
	assert.Error(t, a.Close(), "Close reports the failed flush")

	body, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.NotContains(t, string(body), `"refused"`, "a refused record is not written")
	assert.Contains(t, string(body), `"d1"`, "the record written before the failure stays")
	rows, err := a.Records(ctx, "")
	require.NoError(t, err)
	for _, r := range rows {
		assert.NotEqual(t, "refused", r.DecisionID)
	}
}

// TestDurabilityOSFlushDelaysNoBatch: under DurabilityOS the background
// flush runs beside the batches. While its fsync is stalled, records are
// still committed and answered; once it is done, the next flush syncs them.
func TestDurabilityOSFlushDelaysNoBatch(t *testing.T) {
	a, probe, _ := probedAudit(t, DurabilityOS, 5*time.Millisecond)
	release := make(chan struct{})
	probe.stall.Store(&release)
	recordN(t, a, 0, 1)
	require.Eventually(t, func() bool { return probe.stalled.Load() == 1 }, 10*time.Second, time.Millisecond,
		"the background flush syncs the line, and stalls")

	answered := make(chan error)
	go func() {
		for i := 1; i <= 20; i++ {
			if err := a.Record(context.Background(), "decision", map[string]string{"decision_id": fmt.Sprint("d", i)}); err != nil {
				answered <- err
				return
			}
		}
		answered <- nil
	}()
	select {
	case err := <-answered:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("records waited for the stalled flush")
	}
	assert.EqualValues(t, 1, probe.stalled.Load(), "answered while the flush was still stalled")

	probe.stall.Store(nil)
	close(release)
	calls := probe.calls.Load()
	require.Eventually(t, func() bool { return probe.calls.Load() > calls }, 10*time.Second, time.Millisecond,
		"the next flush syncs the records answered meanwhile")
	require.Eventually(t, func() bool { return a.file.written.Load() == a.file.synced.Load() }, 10*time.Second, time.Millisecond,
		"every line answered is synced")
	require.NoError(t, a.Close())
}

// TestDurabilityOSFlushesWithoutPause checks that the flush is not starved
// by batches that follow each other without a pause: the request joins the
// next batch.
func TestDurabilityOSFlushesWithoutPause(t *testing.T) {
	a, probe, _ := probedAudit(t, DurabilityOS, FlushInterval)
	ctx, cancel := context.WithTimeout(context.Background(), 10*FlushInterval)
	defer cancel()
	done := make(chan int)
	for w := range 4 {
		go func() {
			n := 0
			for ctx.Err() == nil {
				if a.Record(context.Background(), "decision", map[string]string{"decision_id": fmt.Sprint(w, "-", n)}) == nil {
					n++
				}
			}
			done <- n
		}()
	}
	total := 0
	for range 4 {
		total += <-done
	}
	require.Positive(t, total)
	assert.GreaterOrEqual(t, probe.calls.Load(), int64(3), "%d records in %v, flushed %d times",
		total, 10*FlushInterval, probe.calls.Load())
}
