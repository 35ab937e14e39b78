package connector

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"runtime/debug"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/svc-dev/svc/connector/internal/strictjson"
	"github.com/svc-dev/svc/engine/ijson"
	"github.com/svc-dev/svc/transport"
)

// MaxBody bounds a request body; LiteLLM's post-call bodies carry the
// answer's texts and images besides the tool calls.
const MaxBody = 8 << 20

// Rule of a request the connector cannot read.
const ruleInvalidRequest = "svc.core/invalid_request"

// ServerConfig is what the HTTP side needs besides the Governor.
type ServerConfig struct {
	Token       string // SVC_CONNECTOR_TOKEN; "" only with AllowAnonymous
	Version     string
	CoreURL     string // shown in health, password redacted
	HoldWait    time.Duration
	Mode        string
	LedgerPath  string
	Tenancy     Tenancy
	Counters    *Counters
	Observer    Observer     // nil: none
	Metrics     http.Handler // nil: /metrics is not served
	Log         zerolog.Logger
	Governor    *Governor
	MaxBodySize int64         // 0: MaxBody
	MaxPreCall  int64         // read past MaxBodySize for a pre_call request; 0: MaxPreCallBody
	BodyTimeout time.Duration // 0: BodyTimeout
}

// BodyTimeout bounds the read of a request body: a caller that sends its
// headers and then stalls is answered, and its connection closed.
const BodyTimeout = 60 * time.Second

// Server serves the connector's routes.
type Server struct {
	cfg     ServerConfig
	token   [sha256.Size]byte
	lenient chan struct{} // one pre_call body past MaxBodySize read at a time
}

// NewServer returns a Server.
func NewServer(cfg ServerConfig) *Server {
	if cfg.MaxBodySize == 0 {
		cfg.MaxBodySize = MaxBody
	}
	if cfg.MaxPreCall == 0 {
		cfg.MaxPreCall = MaxPreCallBody
	}
	if cfg.BodyTimeout == 0 {
		cfg.BodyTimeout = BodyTimeout
	}
	return &Server{cfg: cfg, token: sha256.Sum256([]byte(cfg.Token)), lenient: make(chan struct{}, 1)}
}

// Handler routes exactly the guardrail route, the batch route, /healthz and
// /metrics; any other path (one that is not clean included: "//healthz",
// "/beta/./…") answers 404 and another method 405.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+GuardrailPath, s.guard("guardrail", s.handleGuardrail))
	mux.HandleFunc("POST "+BatchPath, s.guard("batch", s.handleBatch))
	mux.HandleFunc("GET /healthz", s.handleHealth)
	if s.cfg.Metrics != nil {
		mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
			if !s.authorised(r) {
				s.unauthorised(w)
				return
			}
			s.cfg.Metrics.ServeHTTP(w, r)
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		switch {
		case r.URL.Path != path.Clean(r.URL.Path) || r.URL.Path == "":
			// ServeMux would redirect "//beta/…" or "/beta/./…" to the
			// route; only the exact paths are served.
			http.NotFound(w, r)
		case r.Method == http.MethodHead && (r.URL.Path == "/healthz" || r.URL.Path == "/metrics"):
			// ServeMux would answer HEAD with a GET route: only GET is.
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		default:
			mux.ServeHTTP(w, r)
		}
	})
}

// authorised checks x-api-key (or a bearer, for scrapers) against the
// connector token in constant time.
func (s *Server) authorised(r *http.Request) bool {
	if s.cfg.Token == "" {
		return true
	}
	key := r.Header.Get("x-api-key")
	if h := r.Header.Get("Authorization"); key == "" && len(h) > len("Bearer ") && strings.EqualFold(h[:len("Bearer ")], "Bearer ") {
		key = h[len("Bearer "):] // the scheme is case-insensitive (RFC 9110 §11.1)
	}
	sum := sha256.Sum256([]byte(key))
	return key != "" && subtle.ConstantTimeCompare(sum[:], s.token[:]) == 1
}

func (s *Server) unauthorised(w http.ResponseWriter) {
	s.cfg.Counters.Unauthorised.Add(1)
	writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "unauthorized",
		"reason": "x-api-key must be the connector token (SVC_CONNECTOR_TOKEN)"})
}

// guard checks the token, reads the body within bounds, times the answer
// and turns a panic into a refusal (200, fail closed), never a 5xx.
func (s *Server) guard(route string, h func(w http.ResponseWriter, r *http.Request, body []byte) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.authorised(r) {
			s.unauthorised(w)
			return
		}
		start := time.Now()
		defer func() {
			if v := recover(); v != nil {
				s.cfg.Log.Error().Str("panic", fmt.Sprint(v)).Str("stack", string(debug.Stack())).Str("route", route).
					Msg("connector fault; request refused (fail closed)")
				s.cfg.Counters.InternalErrors.Add(1)
				s.refuseAll(w, route, "connector fault; refused (fail closed)")
			}
			if s.cfg.Observer != nil {
				s.cfg.Observer.Answered(route, time.Since(start))
			}
		}()
		// One read deadline for the whole body, however it is read; lifted
		// before governing: net/http would cancel the request's context when
		// it passes, during a hold wait say.
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout)) // unsupported only by test recorders
		body, read, err := s.readBody(r)
		pre := err != nil && route == "guardrail" && s.preCallAfterAll(r, body, read)
		_ = rc.SetReadDeadline(time.Time{})
		if err == nil {
			if err = h(w, r, body); err == nil {
				return
			}
			pre = route == "guardrail" && preCallOnly(bytes.NewReader(body))
		}
		if pre {
			s.preCall(w)
			return
		}
		if read != readWhole {
			transport.DropBody(w)
		}
		s.badRequest(w, route, err)
	}
}

// readState tells how much of a body readBody read.
type readState int

const (
	readWhole   readState = iota // to its end, within MaxBodySize
	readTooLong                  // MaxBodySize and more remain
	readCutOff                   // the client stopped sending, or too slowly
)

// preCallAfterAll reports whether a body the strict reader refused is
// unambiguously a pre_call request, which governs nothing (a duplicate
// member, a lone surrogate or a large image in the prompt). A body longer
// than MaxBodySize is read on up to MaxPreCall more, one such at a time
// (its values are buffered); one longer still, or cut off, is not.
func (s *Server) preCallAfterAll(r *http.Request, body []byte, read readState) bool {
	switch read {
	case readWhole:
		return preCallOnly(bytes.NewReader(body))
	case readTooLong:
		select {
		case s.lenient <- struct{}{}:
			defer func() { <-s.lenient }()
		default:
			return false
		}
		rest := &io.LimitedReader{R: r.Body, N: s.cfg.MaxPreCall + 1}
		return preCallOnly(io.MultiReader(bytes.NewReader(body), rest)) && rest.N > 0 // N 0: the body went on past the bound, unread
	}
	return false
}

// readBody reads a request body within MaxBodySize that is I-JSON text:
// invalid UTF-8 and lone surrogates read as U+FFFD, so that two calls that
// differ there would be one call to the engine (engine/ijson). The body is
// returned as read, and how far, on an error too.
func (s *Server) readBody(r *http.Request) ([]byte, readState, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, s.cfg.MaxBodySize+1))
	switch {
	case err != nil:
		// Not err's text: it names the connector's socket addresses, and
		// the refusal reaches the gateway's client. The log has it.
		s.cfg.Log.Warn().Err(err).Msg("request body cut off")
		return body, readCutOff, &BadRequest{Reason: fmt.Sprintf("request body not received in full (cut off, or not within %s)", s.cfg.BodyTimeout)}
	case int64(len(body)) > s.cfg.MaxBodySize:
		return body, readTooLong, &BadRequest{Reason: fmt.Sprintf("request body exceeds %d bytes", s.cfg.MaxBodySize)}
	}
	if err := ijson.Check(body); err != nil {
		return body, readWhole, &BadRequest{Reason: err.Error()}
	}
	return body, readWhole, nil
}

// preCall answers a pre_call request: NONE, counted.
func (s *Server) preCall(w http.ResponseWriter) {
	s.cfg.Counters.PreCallRequests.Add(1)
	writeJSON(w, http.StatusOK, guardrailResponse{Action: ActionNone})
}

// badRequest answers a body the connector cannot read, counted in
// invalid_requests: on the guardrail route BLOCKED (a 4xx would let a
// gateway with fail_on_error off through), or NONE in observe mode, which
// never blocks; on the batch route 400 naming the field.
func (s *Server) badRequest(w http.ResponseWriter, route string, err error) {
	s.cfg.Counters.InvalidRequests.Add(1)
	br := &BadRequest{Reason: err.Error()}
	errors.As(err, &br)
	observe := route != "batch" && s.cfg.Mode == ModeObserve
	msg := "request refused: body not readable"
	if observe {
		msg = "observe mode: body not readable; enforce would refuse it"
	}
	s.cfg.Log.Warn().Err(err).Str("route", route).Msg(msg)
	switch {
	case route == "batch":
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request", "field": br.Field, "reason": br.Reason})
	case observe:
		writeJSON(w, http.StatusOK, guardrailResponse{Action: ActionNone})
	default:
		writeJSON(w, http.StatusOK, refusedRequest(ErrDenied, ruleInvalidRequest, "the guardrail request is not readable: "+br.Error()))
	}
}

// refuseAll answers a fault outside the per-call path.
func (s *Server) refuseAll(w http.ResponseWriter, route, reason string) {
	if route == "batch" {
		p := &RefusalPayload{Svc: RefusalList{Version: 1, Refused: []Refusal{{Error: ErrFailClosed, Rule: RuleFailClosed, Reason: reason, Stage: StageRefused}}}}
		writeJSON(w, http.StatusOK, Result{Outcomes: []Outcome{}, RefusalPayload: p})
		return
	}
	writeJSON(w, http.StatusOK, refusedRequest(ErrFailClosed, RuleFailClosed, reason))
}

func (s *Server) handleGuardrail(w http.ResponseWriter, r *http.Request, body []byte) error {
	var g guardrailRequest
	if err := strictjson.Decode(body, &g, false); err != nil {
		return err
	}
	switch deref(g.InputType) {
	case InputRequest:
		s.preCall(w)
		return nil
	case InputResponse:
	case "":
		return &BadRequest{Field: "input_type", Reason: "is required (request or response)"}
	default:
		return &BadRequest{Field: "input_type", Reason: "must be request or response"}
	}
	req, err := g.toRequest()
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, answer(s.cfg.Governor.Govern(r.Context(), req)))
	return nil
}

func (s *Server) handleBatch(w http.ResponseWriter, r *http.Request, body []byte) error {
	req, err := parseBatch(body)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.cfg.Governor.Govern(r.Context(), req))
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	raw, err := json.Marshal(v)
	if err != nil {
		status, raw = http.StatusOK, []byte(`{"action":"BLOCKED","blocked_reason":"Svc: answer could not be encoded [rule=svc.core/fail_closed]"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(raw, '\n'))
}
