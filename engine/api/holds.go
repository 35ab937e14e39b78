package api

import (
	"net/http"
	"time"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/envelope"
)

func (s *Server) handleListHolds(w http.ResponseWriter, r *http.Request) {
	raw, err := engine.StrictQuery(r, "status", "limit", "order", "cursor")
	if err != nil {
		s.writeError(w, err)
		return
	}
	q, err := engine.ParseHoldQuery(raw)
	if err != nil {
		s.writeError(w, err)
		return
	}
	q.Now = s.engine.Now()
	page, err := s.holds.ListJSON(r.Context(), q)
	if err != nil {
		s.writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(page) // the client may be gone; nothing to do
}

// handleGetHold answers a hold; with ?wait=<seconds> it first waits, up to
// engine.MaxHoldWait, until the hold leaves pending (awaitHold). A client that
// leaves during the wait gets nothing more.
func (s *Server) handleGetHold(w http.ResponseWriter, r *http.Request) {
	var wait time.Duration
	raw, err := engine.StrictQuery(r, "wait")
	if err == nil {
		wait, err = engine.ParseHoldWait(raw)
	}
	if err != nil {
		s.writeError(w, err)
		return
	}
	if wait > 0 {
		release, ok := s.waitSlot()
		if !ok {
			// Every slot waits: answered at once, the connection freed.
			w.Header().Set("Connection", "close")
			w.Header().Set("Retry-After", "1")
			wait = 0
		}
		defer release()
	}
	h, err := s.awaitHold(r.Context(), r.PathValue("id"), wait)
	if r.Context().Err() != nil {
		return
	}
	if err != nil {
		s.writeError(w, notFoundHold(err, r.PathValue("id")))
		return
	}
	writeJSON(w, http.StatusOK, h)
}

// notFoundHold gives a not-found error the body of spec §4.3.
func notFoundHold(err error, id string) error {
	if engine.ErrorCode(err) == engine.ENOTFOUND {
		return &engine.Error{Code: engine.ENOTFOUND, Name: "not_found", Message: "no such hold",
			Fields: map[string]any{"hold_id": id}}
	}
	return err
}

// resolveFields are the member names of a resolve body (docs/api.md).
var resolveFields = []string{"decision", "reason", "principal", "principal.type", "principal.id"}

type resolveBody struct {
	Decision  *string           `json:"decision"` // nil and "" are both refused by the resolver
	Reason    *string           `json:"reason"`
	Principal *engine.Principal `json:"principal"`
}

func (s *Server) handleResolve(w http.ResponseWriter, r *http.Request) {
	raw, err := s.readBody(w, r)
	if err != nil {
		writeBodyError(w, err)
		return
	}
	var body resolveBody
	if err := decodeStrict(raw, &body, "body must be a JSON object {decision, reason?}", resolveFields...); err != nil {
		s.writeError(w, err)
		return
	}
	// The resolver validates decision after looking the hold up, so an
	// unknown hold is a 404 whatever the body says.
	req := engine.ResolveRequest{HoldID: r.PathValue("id"), Credential: bearer(r), Asserted: body.Principal,
		Now: s.engine.Now()}
	if body.Decision != nil {
		req.Decision = *body.Decision
	}
	if body.Reason != nil {
		req.Reason = envelope.Clean(*body.Reason)
	}
	h, err := s.resolver.Resolve(r.Context(), req)
	if err != nil {
		s.writeError(w, notFoundHold(err, req.HoldID))
		return
	}
	s.watch.notify(req.HoldID)
	writeJSON(w, http.StatusOK, h)
}
