package engine

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

	"github.com/svc-dev/svc/engine/envelope"
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
}

// Server serves the engine's routes.
type Server struct {
	cfg      ServerConfig
	engine   *Engine
	holds    Holds
	resolver Resolver
	gate     Gatekeeper              // nil when introspection is off
	kill     *KillSwitch             // nil: no freeze routes
	health   func() map[string]any   // extra /healthz fields, may be nil
	extra    map[string]http.Handler // further routes (e.g. GET /metrics)
	watch    *holdWatch              // wakes the long-polls of holds
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
	Engine     *Engine
	Holds      Holds
	Resolver   Resolver
	Gatekeeper Gatekeeper
	KillSwitch *KillSwitch
	Health     func() map[string]any
	Routes     map[string]http.Handler
	Logger     zerolog.Logger
}

// NewServer returns the engine's HTTP server.
func NewServer(cfg ServerConfig, deps ServerDeps) *Server {
	return &Server{cfg: cfg, engine: deps.Engine, holds: deps.Holds, resolver: deps.Resolver,
		gate: deps.Gatekeeper, kill: deps.KillSwitch, health: deps.Health, extra: deps.Routes, log: deps.Logger,
		watch:      newHoldWatch(),
		refusedLog: deps.Logger.Sample(&zerolog.BurstSampler{Burst: refusedLogBurst, Period: time.Second}),
		portalLog:  deps.Logger.Sample(&zerolog.BurstSampler{Burst: 1, Period: portalLogPeriod})}
}

// Handler returns the routed handler with the common middleware.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.handleHealth)
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
	return s.recoverer(securityHeaders(crossOrigin(mux)))
}

// crossOrigin refuses state-changing requests that a browser sends from
// another origin (Sec-Fetch-Site, or an Origin whose host is not the
// request's Host: net/http's CrossOriginProtection), so that a web page
// cannot post to an engine it can reach, e.g. on loopback with no token.
// Clients that are not browsers send neither header and are not affected.
func crossOrigin(next http.Handler) http.Handler {
	c := http.NewCrossOriginProtection()
	c.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := map[string]any{"error": "forbidden", "reason": "cross_origin_request"}
		if isDecide(r) {
			writeRefusal(w, http.StatusForbidden, body)
			return
		}
		writeJSON(w, http.StatusForbidden, body)
	}))
	return c.Handler(next)
}

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
					writeJSON(w, http.StatusInternalServerError, Decision{Decision: Deny, Rule: RuleInternalError,
						Reason: "engine fault; denied (fail closed)", Obligations: []string{}, DecisionID: NewID()})
					return
				}
				writeJSON(w, http.StatusInternalServerError, map[string]any{"error": EINTERNAL})
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
	body, err := readBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		writeRefusal(w, http.StatusRequestEntityTooLarge, map[string]any{"error": "payload_too_large",
			"reason": "request body exceeds SVC_MAX_BODY_BYTES"})
		return
	}
	env, err := envelope.ParseEnvelope(body)
	var inv *envelope.InvalidEnvelope
	switch {
	case errors.Is(err, envelope.ErrInvalidJSON):
		writeRefusal(w, http.StatusBadRequest, map[string]any{"error": "invalid_json",
			"reason": "request body is not one well-formed JSON value"})
		return
	case errors.As(err, &inv):
		writeRefusal(w, http.StatusBadRequest, map[string]any{"error": "invalid_envelope",
			"field": inv.Field, "reason": inv.Reason})
		return
	}
	d, status := s.engine.Decide(r.Context(), Request{Envelope: env, Gate: gate, Received: received})
	writeJSON(w, status, d)
}

// readBody reads at most limit bytes; a larger body is an error.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, &http.MaxBytesError{Limit: limit}
	}
	return io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
}

// writeRefusal answers a refused decide request; the body also carries a
// deny so that a client reading only "decision" blocks.
func writeRefusal(w http.ResponseWriter, status int, body map[string]any) {
	body["decision"] = Deny
	body["rule"] = RuleInvalidRequest
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
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Code: EINTERNAL, Message: "internal error"}
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
	status := statusOf(e.Code)
	if status >= http.StatusInternalServerError {
		s.log.Error().Err(err).Msg("request failed")
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
