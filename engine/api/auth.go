package api

import (
	"errors"
	"net/http"
	"strings"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/transport"
)

// decideAuth admits a decide request with SVC_AUTH_TOKEN (tried first, no
// gate header needed) or, when introspection is on, a portal-issued gate
// credential. With neither configured the route is open.
func (s *Server) decideAuth(next func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.AuthToken == "" && s.gate == nil {
			next(w, r, "")
			return
		}
		tok := bearer(r)
		if equalToken(tok, s.cfg.AuthToken) {
			next(w, r, "")
			return
		}
		if s.gate == nil || tok == "" {
			s.logRefused(r, tok, nil)
			s.refuseAuth(w, engine.Errorf(engine.EUNAUTHORIZED, "missing or invalid bearer token"))
			return
		}
		gate, err := s.gate.Authenticate(r.Context(), tok, declaredGate(r))
		if err != nil {
			s.logRefused(r, tok, err)
			s.refuseAuth(w, err)
			return
		}
		next(w, r, gate)
	}
}

// refuseAuth answers 401 or 403 on /v1/decide, without reading the
// request's body (transport.DropBody); the answer carries a deny.
func (s *Server) refuseAuth(w http.ResponseWriter, err error) {
	transport.DropBody(w)
	var e *engine.Error
	if !errors.As(err, &e) {
		e = engine.Errorf(engine.EUNAUTHORIZED, "credential refused")
	}
	body := map[string]any{"decision": engine.Deny, "rule": "svc.core/unauthorized"}
	for k, v := range e.Fields {
		body[k] = v
	}
	if e.Code == engine.EUNAUTHORIZED {
		w.Header().Set("WWW-Authenticate", "Bearer")
		body["error"] = "unauthorized"
	} else if _, ok := body["error"]; !ok {
		body["error"] = "forbidden"
	}
	writeJSON(w, engine.StatusOf(e.Code), body)
}

// holdsAuth admits SVC_AUTH_TOKEN or a resolver token when any credential
// is configured (SVC_AUTH_TOKEN, or gate introspection, which must not leave
// the hold routes open); portal-issued credentials are never accepted here.
func (s *Server) holdsAuth(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.AuthToken == "" && s.gate == nil {
			next(w, r)
			return
		}
		tok := bearer(r)
		if equalToken(tok, s.cfg.AuthToken) {
			next(w, r)
			return
		}
		if _, ok, err := s.identify(tok); err != nil {
			s.writeError(w, err)
			return
		} else if ok {
			next(w, r)
			return
		}
		s.unauthorized(w, r, tok)
	}
}

// tokenAuth admits SVC_AUTH_TOKEN when it is configured.
func (s *Server) tokenAuth(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok := bearer(r)
		if s.cfg.AuthToken == "" || equalToken(tok, s.cfg.AuthToken) {
			next(w, r)
			return
		}
		s.unauthorized(w, r, tok)
	}
}

// unauthorized logs and answers a request whose credential tok (possibly
// none) was refused, without reading its body (transport.DropBody).
func (s *Server) unauthorized(w http.ResponseWriter, r *http.Request, tok string) {
	s.logRefused(r, tok, nil)
	transport.DropBody(w)
	w.Header().Set("WWW-Authenticate", "Bearer")
	writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "unauthorized"})
}

// declaredGate is the X-Svc-Gate of r, its lines joined by commas, so that
// several lines declare several gates (a mismatch) rather than the first.
func declaredGate(r *http.Request) string {
	return strings.Join(r.Header.Values(GateHeader), ",")
}

// logRefused records a refused credential for the operator: the route, the
// client address and whether a credential was presented, never the
// credential itself; cause is the gate's reason, if any. The lines are
// sampled (refusedLogBurst per second) so that a client spraying tokens
// cannot flood the log. A refusal the portal caused (*PortalError) is an
// outage, logged as an error once per portalLogPeriod at most.
func (s *Server) logRefused(r *http.Request, tok string, cause error) {
	if _, ok := errors.AsType[*PortalError](cause); ok {
		s.portalLog.Error().Err(cause).Str("path", r.URL.Path).
			Msg("gate portal failed (unreachable, or an answer svc cannot use): every gate credential is refused until it answers")
		return
	}
	ev := s.refusedLog.Warn().Str("method", r.Method).Str("path", r.URL.Path).
		Str("remote", r.RemoteAddr).Bool("credential_presented", tok != "")
	if cause != nil {
		ev = ev.Err(cause)
	}
	ev.Msg("request refused: missing or invalid credential")
}

// identify looks tok up among the resolver credentials.
func (s *Server) identify(tok string) (engine.Principal, bool, error) {
	if tok == "" || s.resolver == nil {
		return engine.Principal{}, false, nil
	}
	return s.resolver.Identify(tok)
}
