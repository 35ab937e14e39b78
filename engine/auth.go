package engine

import (
	"errors"
	"net/http"
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
			s.refuseAuth(w, Errorf(EUNAUTHORIZED, "missing or invalid bearer token"))
			return
		}
		gate, err := s.gate.Authenticate(r.Context(), tok, r.Header.Get(GateHeader))
		if err != nil {
			s.log.Warn().Err(err).Msg("gate credential refused")
			s.refuseAuth(w, err)
			return
		}
		next(w, r, gate)
	}
}

// refuseAuth answers 401 or 403 on /v1/decide; the body carries a deny.
func (s *Server) refuseAuth(w http.ResponseWriter, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = Errorf(EUNAUTHORIZED, "credential refused")
	}
	body := map[string]any{"decision": Deny, "rule": "svc.core/unauthorized"}
	for k, v := range e.Fields {
		body[k] = v
	}
	if e.Code == EUNAUTHORIZED {
		w.Header().Set("WWW-Authenticate", "Bearer")
		body["error"] = "unauthorized"
	} else if _, ok := body["error"]; !ok {
		body["error"] = "forbidden"
	}
	writeJSON(w, statusOf(e.Code), body)
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
		unauthorized(w)
	}
}

// tokenAuth admits SVC_AUTH_TOKEN when it is configured.
func (s *Server) tokenAuth(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.AuthToken == "" || equalToken(bearer(r), s.cfg.AuthToken) {
			next(w, r)
			return
		}
		unauthorized(w)
	}
}

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", "Bearer")
	writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "unauthorized"})
}

// identify looks tok up among the resolver credentials.
func (s *Server) identify(tok string) (Principal, bool, error) {
	if tok == "" || s.resolver == nil {
		return Principal{}, false, nil
	}
	return s.resolver.Identify(tok)
}
