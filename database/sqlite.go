package database

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"
)

// SQLite is the name of the database/sql driver svc opens its SQLite files
// with: mattn/go-sqlite3 with SQLite's automatic checkpoints turned off on
// every connection (PRAGMA wal_autocheckpoint=0). With them on, the commit
// that takes the write-ahead log past 1,000 pages copies the log into the
// database file and syncs that file before it returns: a few milliseconds
// more for whichever request made that commit, about one in a hundred at
// one client (docs/performance.md). Checkpoint does that work in the
// background instead; a process that opens a file with this driver and
// writes to it for long must run it.
const SQLite = "sqlite3-svc"

func init() {
	sql.Register(SQLite, &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
		if _, err := c.Exec("PRAGMA wal_autocheckpoint=0", nil); err != nil {
			return fmt.Errorf("turn automatic checkpoints off: %w", err)
		}
		return nil
	}})
}

// CheckpointInterval is how often Checkpoint copies the write-ahead log
// into the database file.
const CheckpointInterval = time.Second

// restartFrames is the size of the write-ahead log, in pages, past which
// Checkpoint makes sure that the log is written again from its start.
const restartFrames = 4096

// CheckpointConfig is how Checkpoint runs.
type CheckpointConfig struct {
	// Every is the interval between two checkpoints.
	Every time.Duration
	// Exclusive runs fn while no write transaction of this process is in
	// progress, or returns ctx's error if it cannot start before ctx ends.
	Exclusive func(ctx context.Context, fn func()) error
	// Failed is told of a checkpoint that fails after one that did not (or
	// the first), not at every interval of a failure that lasts.
	Failed func(error)
}

// Checkpoint copies the write-ahead log of the SQLite database db into its
// database file every c.Every, in the background, until the returned stop is
// called (which waits for it; a second call returns at once). Each is a PASSIVE checkpoint, run on a
// connection of db's pool, which neither waits for nor blocks a writer or a
// reader: the commits go on appending to the log meanwhile.
//
// SQLite writes the log again from its start only when a write transaction
// begins with the log copied whole, which a checkpoint running beside a
// steady stream of commits never leaves it: a commit lands while it copies.
// So once the log is longer than restartFrames pages, the checkpoint is
// followed by one under c.Exclusive, which holds this process's commits off
// while it copies the few pages committed meanwhile; the next commit then
// restarts the log, whose size stays bounded.
func Checkpoint(db *sql.DB, c CheckpointConfig) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(c.Every)
		defer t.Stop()
		failing := false
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			err := checkpoint(ctx, db, c.Exclusive)
			if err != nil && ctx.Err() == nil && !failing {
				c.Failed(fmt.Errorf("checkpoint the write-ahead log: %w", err))
			}
			failing = err != nil
		}
	}()
	return func() {
		cancel()
		wg.Wait()
	}
}

// checkpoint runs one checkpoint of db and, when the log is long, another
// under exclusive.
func checkpoint(ctx context.Context, db *sql.DB, exclusive func(context.Context, func()) error) error {
	logged, err := passive(ctx, db)
	if err != nil || logged < restartFrames {
		return err
	}
	if xerr := exclusive(ctx, func() { _, err = passive(ctx, db) }); xerr != nil {
		return xerr
	}
	return err
}

// passive runs a PASSIVE checkpoint of db and returns the length of the
// log, in pages, when it began.
func passive(ctx context.Context, db *sql.DB) (logged int, err error) {
	var busy, copied int
	err = db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logged, &copied)
	return logged, err
}
