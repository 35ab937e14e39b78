package cmd

import (
	"context"
	"maps"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/svc-dev/svc/holds"
	"github.com/svc-dev/svc/ledger"
)

// defaultRetentionDays is the default of SVC_RETENTION_DAYS.
const defaultRetentionDays = 90

// maxRetentionDays bounds SVC_RETENTION_DAYS (100 years).
const maxRetentionDays = 36500

// retentionEvery is how often the engine and the connector prune; the
// first pruning runs at start.
const retentionEvery = time.Hour

// retentionDefaults is SVC_RETENTION_DAYS, read by `svc serve` and
// `svc connector`.
var retentionDefaults = map[string]any{"retention_days": strconv.Itoa(defaultRetentionDays)}

func init() {
	maps.Copy(serveDefaults, retentionDefaults)
	maps.Copy(connectorDefaults, retentionDefaults)
}

// retention reads SVC_RETENTION_DAYS: 0 keeps every row.
func (p *parser) retention() time.Duration {
	return time.Duration(p.integer("retention_days", 0, maxRetentionDays)) * 24 * time.Hour
}

// pruneFunc deletes what was written before a time, returning how many
// rows it deleted.
type pruneFunc func(ctx context.Context, before time.Time) (int64, error)

// retain runs prune at once and then every retentionEvery until ctx ends,
// deleting what is older than keep (0: nothing), off the decision path;
// what names the rows in the log.
func retain(ctx context.Context, keep time.Duration, log zerolog.Logger, what string, prune pruneFunc) {
	if keep <= 0 {
		return
	}
	t := time.NewTicker(retentionEvery)
	defer t.Stop()
	for {
		before := time.Now().Add(-keep)
		n, err := prune(ctx, before)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn().Err(err).Str("rows", what).Msg("retention: pruning failed; it is tried again within the hour")
		case n > 0:
			log.Info().Int64("deleted", n).Str("rows", what).Time("before", before).Msg("retention: pruned")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pruneEngine prunes the engine's audit mirror and settled holds.
func pruneEngine(db *ledger.DB) pruneFunc {
	return func(ctx context.Context, before time.Time) (int64, error) {
		audit, err := db.Prune(ctx, before, ledger.PruneAudit)
		if err != nil {
			return audit, err
		}
		settled, err := db.Prune(ctx, before, holds.PruneSettled)
		return audit + settled, err
	}
}

// reopenOnHUP reopens the JSONL audit log at each SIGHUP until ctx ends
// (logrotate's postrotate).
func reopenOnHUP(ctx context.Context, audit *ledger.Audit, log zerolog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if err := audit.Reopen(ctx); err != nil {
					log.Error().Err(err).Msg("SIGHUP: audit log not reopened")
					continue
				}
				log.Info().Msg("SIGHUP: audit log reopened")
			}
		}
	}()
}
