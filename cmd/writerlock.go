package cmd

import (
	"context"
	"errors"
	"fmt"

	"github.com/svc-dev/svc/ledger"
)

// lockWriter takes the writer lock of the database at path (none for a
// temporary one, ""), so that a second engine or connector on the same
// database refuses to start (exit 2, naming the path and the pid that
// holds it) rather than splitting budgets with the first.
func lockWriter(path, variable string) (*ledger.WriterLock, error) {
	if path == "" {
		return nil, nil
	}
	l, err := ledger.LockWriter(path)
	if errors.Is(err, ledger.ErrLocked) {
		return nil, &exitError{code: exitConfig, err: fmt.Errorf("%s: %w", variable, err)}
	}
	if err != nil {
		return nil, &exitError{code: exitFailure, err: fmt.Errorf("%s: %w", variable, err)}
	}
	return l, nil
}

// lockDatabase takes the writer lock of SVC_HOLDS_PATH until a is closed,
// and refuses a database a newer svc wrote, before anything else starts.
func (a *app) lockDatabase(ctx context.Context, path string) error {
	l, err := lockWriter(path, "SVC_HOLDS_PATH")
	if err != nil {
		return err
	}
	a.closers = append(a.closers, l.Close)
	return checkSchema(ctx, path)
}
