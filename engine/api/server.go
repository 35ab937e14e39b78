package api

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/envelope"
	"github.com/svc-dev/svc/engine/ijson"
	"github.com/svc-dev/svc/transport"
)

// Gatekeeper authenticates portal-issued gate credentials on /v1/decide
// (spec §5.2). It returns the credential's gate, or an *Error to render.
type Gatekeeper interface {
	Authenticate(ctx context.Context, credential, declaredGate string) (string, error)
}

// ServerConfig is the HTTP surface's configuration.
type ServerConfig struct {
	AuthToken    string
	MaxBodyBytes int64
	// BodyTimeout bounds the read of a request's body (SVC_READ_TIMEOUT);
	// 0 leaves it unbounded.
	BodyTimeout time.Duration
	// MaxHoldWaiters bounds the long-polls (GET /v1/holds/{id}?wait=)
	// waiting at once: past it a wait is answered at once, as wait=0, and
	// its connection closed, so that waits cannot take every connection
	// from decisions. 0 leaves them unbounded.
	MaxHoldWaiters int
}

// Server serves the engine's routes.
type Server struct {
	cfg      ServerConfig
	engine   *engine.Engine
	holds    engine.Holds
	resolver engine.Resolver
	gate     Gatekeeper              // nil when introspection is off
	kill     *engine.KillSwitch      // nil: no freeze routes
	health   func() map[string]any   // extra /healthz fields, may be nil
	ready    []ReadyCheck            // the checks of /readyz
	extra    map[string]http.Handler // further routes (e.g. GET /metrics)
	ui       http.Handler            // the web app under /ui/; nil when off
	watch    *holdWatch              // wakes the long-polls of holds
	waiters  chan struct{}           // a slot per long-poll waiting; nil: unbounded
	log      zerolog.Logger
	// refusedLog is log, sampled, for refused credentials (logRefused).
	refusedLog zerolog.Logger
	// portalLog is log, sampled, for gate portal faults (logRefused).
	portalLog zerolog.Logger
}

// refusedLogBurst is how many refused-credential lines are logged per second
// at most.
const refusedLogBurst = 10

// portalLogPeriod is the period of the portal-fault log: one line per period
// at most, as every gate credential fails alike while the portal is down.
const portalLogPeriod = 10 * time.Second

// ServerDeps are the parts the routes call.
type ServerDeps struct {
	Engine     *engine.Engine
	Holds      engine.Holds
	Resolver   engine.Resolver
	Gatekeeper Gatekeeper
	KillSwitch *engine.KillSwitch
	Health     func() map[string]any
	Ready      []ReadyCheck
	Routes     map[string]http.Handler
	// UI is the reviewers' web app (package inbox), served under /ui/
	// with its own sign-in rather than a bearer token; nil: no web app.
	UI     http.Handler
	Logger zerolog.Logger
}

// NewServer returns the engine's HTTP server.
func NewServer(cfg ServerConfig, deps ServerDeps) *Server {
	var waiters chan struct{}
	if cfg.MaxHoldWaiters > 0 {
		waiters = make(chan struct{}, cfg.MaxHoldWaiters)
	}
	return &Server{cfg: cfg, waiters: waiters, engine: deps.Engine, holds: deps.Holds, resolver: deps.Resolver,
		gate: deps.Gatekeeper, kill: deps.KillSwitch, health: deps.Health, ready: deps.Ready, extra: deps.Routes, ui: deps.UI, log: deps.Logger,
		watch:      newHoldWatch(),
		refusedLog: deps.Logger.Sample(&zerolog.BurstSampler{Burst: refusedLogBurst, Period: time.Second}),
		portalLog:  deps.Logger.Sample(&zerolog.BurstSampler{Burst: 1, Period: portalLogPeriod})}
}

// Handler returns the routed handler with the common middleware.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.handleHealth)
	mux.HandleFunc("GET /readyz", s.handleReady)
	mux.HandleFunc("POST "+decidePath, s.decideAuth(s.handleDecide))
	mux.HandleFunc("GET /v1/holds", s.holdsAuth(s.handleListHolds))
	mux.HandleFunc("GET /v1/holds/{id}", s.holdsAuth(s.handleGetHold))
	mux.HandleFunc("POST /v1/holds/{id}/resolve", s.holdsAuth(s.handleResolve))
	if s.kill != nil {
		mux.HandleFunc("GET /v1/freeze", s.holdsAuth(s.handleGetFreeze))
		mux.HandleFunc("POST /v1/freeze", s.handleSetFreeze)
	}
	for pattern, h := range s.extra {
		mux.Handle(pattern, s.tokenAuth(h.ServeHTTP))
	}
	if s.ui != nil {
		mux.Handle(UIPrefix, s.ui)
	}
	return s.requestLog(s.recoverer(securityHeaders(s.crossOrigin(routeNoter(unrouted(mux))))))
}

// unrouted answers a request for no route (404, or 405 for a known path)
// without reading its body, and closes the connection (transport.DropBody).
func unrouted(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern == "" {
			transport.DropBody(w)
		}
		mux.ServeHTTP(w, r)
	})
}

// crossOrigin refuses state-changing requests that a browser sends from
// another origin (Sec-Fetch-Site, or an Origin whose host is not the
// request's Host: net/http's CrossOriginProtection), so that a web page
// cannot post to an engine it can reach, e.g. on loopback with no token.
// Clients that are not browsers send neither header and are not affected.
func (s *Server) crossOrigin(next http.Handler) http.Handler {
	c := http.NewCrossOriginProtection()
	c.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := map[string]any{"error": "forbidden", "reason": "cross_origin_request"}
		if isDecide(r) {
			s.refuse(w, r, http.StatusForbidden, body)
			return
		}
		writeJSON(w, http.StatusForbidden, body)
	}))
	return c.Handler(next)
}

// UIPrefix is the path under which the web app is served.
const UIPrefix = "/ui/"

// decidePath is the path of the decide route.
const decidePath = "/v1/decide"

// isDecide reports whether r is for the decide route, whose every answer,
// a refusal or a fault included, carries a decision.
func isDecide(r *http.Request) bool {
	return r.URL.Path == decidePath
}

func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		next.ServeHTTP(w, r)
	})
}

// recoverer turns a panic into a deny on /v1/decide and a 500 elsewhere.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error().Interface("panic", p).Str("path", r.URL.Path).Msg("handler panicked")
				if isDecide(r) {
					writeJSON(w, http.StatusInternalServerError, engine.Decision{Decision: engine.Deny, Rule: engine.RuleInternalError,
						Reason: "engine fault; denied (fail closed)", Obligations: []string{}, DecisionID: engine.NewID()})
					return
				}
				writeJSON(w, http.StatusInternalServerError, map[string]any{"error": engine.EINTERNAL})
			}
		}()
		next.ServeHTTP(w, r)
	})
}

func (s *Server) handleHealth(w http.ResponseWriter, _ *http.Request) {
	body := map[string]any{}
	if s.health != nil {
		body = s.health()
	}
	body["status"] = "ok"
	writeJSON(w, http.StatusOK, body)
}

func (s *Server) handleDecide(w http.ResponseWriter, r *http.Request, gate string) {
	received := time.Now()
	body, err := s.readBody(w, r)
	if err != nil {
		status, code, reason := bodyError(w, err)
		s.refuse(w, r, status, map[string]any{"error": code, "reason": reason})
		return
	}
	env, err := envelope.ParseEnvelope(body)
	var inv *envelope.InvalidEnvelope
	switch {
	case errors.Is(err, envelope.ErrInvalidJSON):
		s.refuse(w, r, http.StatusBadRequest, invalidJSONBody(err))
		return
	case errors.As(err, &inv):
		s.refuse(w, r, http.StatusBadRequest, map[string]any{"error": "invalid_envelope",
			"field": inv.Field, "reason": inv.Reason})
		return
	}
	d, status := s.engine.Decide(r.Context(), engine.Request{Envelope: env, Gate: gate, Received: received})
	note := noteOf(r)
	note.decisionID, note.verdict = d.DecisionID, d.Decision
	s.log.Debug().Str("decision_id", d.DecisionID).Str("verdict", d.Decision).Str("rule", d.Rule).Str("reason", d.Reason).
		Str("session_id", env.Agent.SessionID).Str("verb", env.Action.Verb).Str("environment", env.Target.Environment).
		Str("envelope_hash", d.EnvelopeHash).Msg("decision")
	writeJSON(w, status, d)
}

// invalidJSONBody is the refusal of a decide body ParseEnvelope found not
// to be JSON: for a body breaking I-JSON's text rules, the reason and the
// offset name the first offending byte.
func invalidJSONBody(err error) map[string]any {
	if ie, ok := errors.AsType[*ijson.Error](err); ok {
		return map[string]any{"error": "invalid_json", "reason": ie.Error(), "offset": ie.Offset}
	}
	return map[string]any{"error": "invalid_json", "reason": "request body is not one well-formed JSON value"}
}

// readBody reads the body, at most MaxBodyBytes; a larger body is an
// error, and so is a body not received within BodyTimeout. The deadline
// is lifted once the body is read: net/http would otherwise cancel the
// request's context when it passes, its handler running or not.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	limit := s.cfg.MaxBodyBytes
	if r.ContentLength > limit {
		return nil, &http.MaxBytesError{Limit: limit}
	}
	if s.cfg.BodyTimeout > 0 {
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout)) // unsupported only by test recorders
		defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
	}
	return io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
}

// bodyError is the status, error code and reason of the answer to a
// request whose body readBody refused: 413 when it is too large, else 408,
// the client having stopped sending it (or sent it too slowly); the
// connection is closed.
func bodyError(w http.ResponseWriter, err error) (status int, code, reason string) {
	transport.DropBody(w)
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return http.StatusRequestEntityTooLarge, "payload_too_large", "request body exceeds SVC_MAX_BODY_BYTES"
	}
	return http.StatusRequestTimeout, "request_timeout", "request body not received in full within SVC_READ_TIMEOUT"
}

// writeBodyError answers a resolve or freeze request whose body readBody
// refused: {error} with bodyError's status and code.
func writeBodyError(w http.ResponseWriter, err error) {
	status, code, _ := bodyError(w, err)
	writeJSON(w, status, map[string]any{"error": code})
}

// writeRefusal answers a refused decide request; the body also carries a
// deny so that a client reading only "decision" blocks.
func writeRefusal(w http.ResponseWriter, status int, body map[string]any) {
	body["decision"] = engine.Deny
	body["rule"] = engine.RuleInvalidRequest
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client may be gone; nothing to do
}

// writeError renders an *Error (or any error as internal_error); a server
// fault is logged here, once, with its cause, which the body never carries.
func (s *Server) writeError(w http.ResponseWriter, err error) {
	var e *engine.Error
	if !errors.As(err, &e) {
		e = &engine.Error{Code: engine.EINTERNAL, Message: "internal error"}
	}
	body := map[string]any{}
	for k, v := range e.Fields {
		body[k] = v
	}
	body["error"] = e.Code
	if e.Name != "" {
		body["error"] = e.Name
	}
	if _, ok := body["reason"]; !ok && e.Message != "" {
		body["reason"] = e.Message
	}
	status := engine.StatusOf(e.Code)
	switch {
	case status >= http.StatusInternalServerError:
		s.log.Error().Err(err).Msg("request failed")
	case status == http.StatusBadRequest || status == http.StatusRequestEntityTooLarge:
		s.refusedLog.Warn().Int("status", status).Interface("error", body["error"]).Interface("field", body["field"]).
			Msg("request refused")
	}
	writeJSON(w, status, body)
}

// bearer returns the bearer token of the request, "" if none.
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// equalToken compares secrets in constant time.
func equalToken(a, b string) bool {
	return a != "" && b != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
