package api

import (
	"context"
	"net/http"
	"time"

	"github.com/rs/zerolog"
	"github.com/svc-dev/svc/engine"
)

// requestNote is what the request log learns from the handlers: the route
// the mux matched, and on the decide route the decision it answered.
type requestNote struct {
	route      string
	decisionID string
	verdict    string
}

type noteKey struct{}

// noteOf returns the request's note, or a throwaway one outside the
// request log (tests calling a handler directly).
func noteOf(r *http.Request) *requestNote {
	if n, ok := r.Context().Value(noteKey{}).(*requestNote); ok {
		return n
	}
	return &requestNote{}
}

// statusWriter remembers the status a handler answered.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// quietRoutes are logged at debug level: probes and scrapes come every few
// seconds and say nothing an operator debugs with.
var quietRoutes = map[string]bool{"GET /healthz": true, "GET /readyz": true, "GET /metrics": true}

// requestLog logs one line per request once it is answered: method, route,
// status, duration and, on the decide route, the decision id and verdict.
// Never a header, a token or a body.
func (s *Server) requestLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		note := &requestNote{}
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), noteKey{}, note)))
		level := zerolog.InfoLevel
		if quietRoutes[note.route] {
			level = zerolog.DebugLevel
		}
		ev := s.log.WithLevel(level)
		if !ev.Enabled() {
			return
		}
		route := note.route
		if route == "" {
			route = "unmatched"
		}
		ev = ev.Str("method", r.Method).Str("route", route).Int("status", sw.status).
			Float64("duration_ms", float64(time.Since(start).Microseconds())/1000).Str("remote", r.RemoteAddr)
		if note.decisionID != "" {
			ev = ev.Str("decision_id", note.decisionID)
		}
		if note.verdict != "" {
			ev = ev.Str("verdict", note.verdict)
		}
		ev.Msg("request")
	})
}

// routeNoter records the pattern the mux matched in the request's note.
func routeNoter(mux http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mux.ServeHTTP(w, r)
		noteOf(r).route = r.Pattern
	})
}

// refuse answers a refused decide request (writeRefusal) and logs it at
// warning level, sampled as refused credentials are: the error, the field
// and the reason, never the body.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, status int, body map[string]any) {
	ev := s.refusedLog.Warn().Str("method", r.Method).Str("path", r.URL.Path).Str("remote", r.RemoteAddr).Int("status", status)
	for _, k := range []string{"error", "field", "reason"} {
		if v, ok := body[k].(string); ok && v != "" {
			ev = ev.Str(k, v)
		}
	}
	ev.Msg("request refused")
	noteOf(r).verdict = engine.Deny
	writeRefusal(w, status, body)
}
