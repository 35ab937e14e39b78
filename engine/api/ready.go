package api

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"
)

// ReadyCheck is one named check of GET /readyz: the evaluator answers, the
// database takes writes, the audit log can be appended to, and so on.
// Check returns nil when the part is ready; its error's text is shown in
// the answer, so it must hold no secret.
type ReadyCheck struct {
	Name  string
	Check func(ctx context.Context) error
}

// readyTimeout bounds each readiness check: a check that has not answered
// by then is failing.
const readyTimeout = 5 * time.Second

// handleReady answers 200 {status: ready, checks} when every check passes
// and 503 {status: not_ready, failing, checks} naming the failing ones.
// The checks run concurrently, each bounded by readyTimeout. /healthz stays
// the liveness probe: the process answers.
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	results := make([]error, len(s.ready))
	var wg sync.WaitGroup
	for i, c := range s.ready {
		wg.Go(func() { results[i] = runCheck(ctx, c) })
	}
	wg.Wait()
	checks := map[string]string{}
	failing := []string{}
	for i, c := range s.ready {
		checks[c.Name] = "ok"
		if err := results[i]; err != nil {
			checks[c.Name] = err.Error()
			failing = append(failing, c.Name)
		}
	}
	if len(failing) > 0 {
		s.refusedLog.Warn().Strs("failing", failing).Interface("checks", checks).Msg("not ready")
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "not_ready", "failing": failing, "checks": checks})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "checks": checks})
}

// runCheck runs c, turning a check that outlives ctx or panics into an
// error.
func runCheck(ctx context.Context, c ReadyCheck) (err error) {
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- errCheckPanicked
			}
		}()
		done <- c.Check(ctx)
	}()
	select {
	case err = <-done:
		return err
	case <-ctx.Done():
		return errCheckTimedOut
	}
}

// Errors of a readiness check that did not answer.
var (
	errCheckTimedOut = errors.New("did not answer within 5s")
	errCheckPanicked = errors.New("the check failed unexpectedly")
)
