package api

import (
	"net/http"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/envelope"
)

func (s *Server) handleGetFreeze(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.kill.Query())
}

type freezeBody struct {
	Frozen *bool  `json:"frozen"`
	Reason string `json:"reason"`
}

// handleSetFreeze flips or clears the freeze. It always needs a credential:
// SVC_AUTH_TOKEN or the token of a human resolver.
func (s *Server) handleSetFreeze(w http.ResponseWriter, r *http.Request) {
	by, err := s.freezeActor(bearer(r))
	if err != nil {
		if engine.ErrorCode(err) == engine.EUNAUTHORIZED {
			s.unauthorized(w, r, bearer(r))
			return
		}
		s.writeError(w, err)
		return
	}
	raw, err := s.readBody(w, r)
	if err != nil {
		writeBodyError(w, err)
		return
	}
	var body freezeBody
	if err := decodeStrict(raw, &body, "body must be a JSON object {frozen, reason}", "frozen", "reason"); err != nil {
		s.writeError(w, err)
		return
	}
	if body.Frozen == nil {
		s.writeError(w, engine.InvalidField("frozen", "is required and must be a boolean"))
		return
	}
	view, err := s.kill.Set(r.Context(), *body.Frozen, envelope.Clean(body.Reason), by)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, view)
}

// freezeActor names who flips the switch: the operator token, or a human
// resolver's principal.
func (s *Server) freezeActor(tok string) (string, error) {
	if equalToken(tok, s.cfg.AuthToken) {
		return "token:SVC_AUTH_TOKEN", nil
	}
	p, ok, err := s.identify(tok)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", engine.Errorf(engine.EUNAUTHORIZED, "unknown token")
	}
	if envelope.Fold(p.Type) != "human" {
		return "", &engine.Error{Code: engine.EFORBIDDEN, Name: "principal_type_not_allowed",
			Message: "only SVC_AUTH_TOKEN or a human resolver may change the freeze",
			Fields:  map[string]any{"principal": p.String()}}
	}
	return p.String(), nil
}
