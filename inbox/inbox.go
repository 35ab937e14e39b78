package inbox

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/api"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// DefaultSessionTTL is how long a sign-in lasts.
const DefaultSessionTTL = 8 * time.Hour

// maxFormBytes bounds the body of a form post.
const maxFormBytes = 16 << 10

// pageSize is the default page size of the lists.
const pageSize = 50

// csp is the Content-Security-Policy of every answer: nothing inline, no
// other origin, never framed.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// Holds lists holds: holds.Store, with the cursors and filters of
// GET /v1/holds.
type Holds interface {
	List(ctx context.Context, q engine.HoldQuery) (engine.HoldPage, error)
}

// Resolver is the hold service (holds.Service): the one implementation of
// who may resolve a hold.
type Resolver interface {
	Resolve(ctx context.Context, r engine.ResolveRequest) (engine.Hold, error)
	// Vet runs Resolve's checks without resolving; it returns the hold
	// whenever it exists.
	Vet(ctx context.Context, r engine.ResolveRequest) (engine.Hold, error)
	Identify(token string) (engine.Principal, bool, error)
}

// Config is the app's configuration.
type Config struct {
	// PublicURL is SVC_PUBLIC_URL, the engine's address as reviewers
	// reach it ("" when unset); an https one makes the cookies Secure.
	PublicURL string
	// AuthToken is SVC_AUTH_TOKEN, the operator's token: it does not sign
	// in as a person.
	AuthToken string
	// Window is the rolling window of session budgets (SVC_WINDOW_SECONDS).
	Window time.Duration
	// SessionTTL is how long a sign-in lasts; 0 is DefaultSessionTTL.
	SessionTTL time.Duration
	// MaxStreams bounds the event streams of list pages open at once
	// (GET /ui/events); 0 leaves them unbounded.
	MaxStreams int
}

// Deps are the parts the app calls.
type Deps struct {
	Holds    Holds
	Resolver Resolver
	Budgets  engine.Budgets
	// Events tells the open lists of hold events (NewEvents); the same
	// value must be a publisher of the engine and the hold service.
	Events *Events
	// Resolved is called with the id of a hold the app resolved, to wake
	// the long-polls of GET /v1/holds/{id}?wait=; may be nil.
	Resolved func(id string)
	Now      func() time.Time
	Logger   zerolog.Logger
}

// App is the web app, an http.Handler for the paths under /ui/.
type App struct {
	cfg      Config
	deps     Deps
	pages    map[string]*template.Template
	sessions *sessions
	limit    *limiter
	mux      *http.ServeMux
}

// New returns the app.
func New(cfg Config, deps Deps) (*App, error) {
	if deps.Holds == nil || deps.Resolver == nil || deps.Budgets == nil || deps.Events == nil {
		return nil, errors.New("new inbox: holds, resolver, budgets and events are required")
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if cfg.SessionTTL == 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	pages, err := parsePages()
	if err != nil {
		return nil, fmt.Errorf("new inbox: %w", err)
	}
	a := &App{cfg: cfg, deps: deps, pages: pages, sessions: newSessions(cfg.SessionTTL), limit: newLimiter()}
	a.routes()
	return a, nil
}

// HoldURL is the page of hold id under the public URL base.
func HoldURL(base, id string) string {
	return strings.TrimSuffix(base, "/") + api.UIPrefix + "holds/" + url.PathEscape(id)
}

func (a *App) routes() {
	static, _ := fs.Sub(staticFS, "static") // the directory is embedded
	m := http.NewServeMux()
	m.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", http.FileServerFS(static)))
	m.HandleFunc("GET /ui/{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/inbox", http.StatusSeeOther)
	})
	m.HandleFunc("GET /ui/signin", a.handleSigninPage)
	m.HandleFunc("POST /ui/signin", a.handleSignin)
	m.HandleFunc("POST /ui/signout", a.signedIn(a.handleSignout))
	m.HandleFunc("GET /ui/inbox", a.signedIn(a.listPage(pendingList)))
	m.HandleFunc("GET /ui/history", a.signedIn(a.listPage(historyList)))
	m.HandleFunc("GET /ui/holds/{id}", a.signedIn(a.handleHold))
	m.HandleFunc("POST /ui/holds/{id}/resolve", a.signedIn(a.handleResolve))
	m.HandleFunc("GET /ui/events", a.signedIn(a.handleEvents))
	m.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		a.fail(w, r, nil, http.StatusNotFound, "Not found", "There is no page at this address.")
	})
	a.mux = m
}

// ServeHTTP serves the app with its security headers.
func (a *App) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	a.mux.ServeHTTP(w, r)
}

// viewer is the signed-in person of a request.
type viewer struct {
	Principal engine.Principal
	CSRF      string
	session   *session
}

type viewerKey struct{}

// signedIn admits a request of a live session whose token still maps to a
// principal, and redirects any other to the sign-in page.
func (a *App) signedIn(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie(sessionCookie)
		if err != nil {
			a.toSignin(w, r, "")
			return
		}
		se, ok := a.sessions.lookup(c.Value, a.deps.Now())
		if !ok {
			a.setCookie(w, r, sessionCookie, "", -1)
			a.toSignin(w, r, "expired")
			return
		}
		p, ok, err := a.deps.Resolver.Identify(se.token)
		if err != nil {
			a.deps.Logger.Error().Err(err).Msg("web app: resolver tokens cannot be read")
			a.fail(w, r, nil, http.StatusInternalServerError, "Resolver tokens unavailable",
				"SVC_RESOLVER_TOKENS cannot be read or parsed: nobody is signed in until the operator fixes it.")
			return
		}
		if !ok || sameSecret(se.token, a.cfg.AuthToken) {
			a.sessions.end(se.id)
			a.setCookie(w, r, sessionCookie, "", -1)
			a.toSignin(w, r, "revoked")
			return
		}
		v := &viewer{Principal: p, CSRF: se.csrf, session: se}
		next(w, r.WithContext(context.WithValue(r.Context(), viewerKey{}, v)))
	}
}

// viewerOf is the signed-in person of r (set by signedIn).
func viewerOf(r *http.Request) *viewer {
	v, _ := r.Context().Value(viewerKey{}).(*viewer)
	return v
}

// toSignin redirects to the sign-in page, which then returns to the page
// asked for (a GET's) and says why, if why is set.
func (a *App) toSignin(w http.ResponseWriter, r *http.Request, why string) {
	q := url.Values{}
	if r.Method == http.MethodGet && r.URL.Path != "/ui/events" {
		q.Set("next", r.URL.RequestURI())
	}
	if why != "" {
		q.Set("why", why)
	}
	target := "/ui/signin"
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	if r.URL.Path == "/ui/events" {
		w.WriteHeader(http.StatusUnauthorized) // EventSource stops; the next reload signs in
		return
	}
	http.Redirect(w, r, target, http.StatusSeeOther)
}

// localNext is next if it is a path of the app, else the inbox: never a
// redirect to another site.
func localNext(next string) string {
	if !strings.HasPrefix(next, api.UIPrefix) || strings.ContainsAny(next, "\\\r\n") ||
		strings.HasPrefix(next, "//") {
		return "/ui/inbox"
	}
	return next
}

// formTimeout bounds the read of a form's body.
const formTimeout = 10 * time.Second

// readForm parses a posted form of at most maxFormBytes, received within
// formTimeout.
func readForm(w http.ResponseWriter, r *http.Request) error {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(formTimeout)) // unsupported only by test recorders
	defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	return r.ParseForm()
}

// postedForm reads the form of a post of the signed-in person v and checks
// its CSRF token, answering the request and reporting false when either
// fails.
func (a *App) postedForm(w http.ResponseWriter, r *http.Request, v *viewer) bool {
	if err := readForm(w, r); err != nil {
		a.fail(w, r, v, http.StatusBadRequest, "Form refused", "The form could not be read: "+err.Error()+".")
		return false
	}
	if !checkCSRF(r, v) {
		a.csrfRefused(w, r, v)
		return false
	}
	return true
}

// checkCSRF reports whether the form's csrf field is the session's token.
func checkCSRF(r *http.Request, v *viewer) bool {
	return sameSecret(r.PostFormValue("csrf"), v.CSRF)
}

// csrfRefused answers a form post whose CSRF token is missing or wrong.
func (a *App) csrfRefused(w http.ResponseWriter, r *http.Request, v *viewer) {
	a.fail(w, r, v, http.StatusForbidden, "Form refused",
		"This form's CSRF token is missing or does not match your session, so nothing was done. "+
			"Reload the page and try again.")
}

// handleSignout ends the session.
func (a *App) handleSignout(w http.ResponseWriter, r *http.Request) {
	v := viewerOf(r)
	if !a.postedForm(w, r, v) {
		return
	}
	a.sessions.end(v.session.id)
	a.setCookie(w, r, sessionCookie, "", -1)
	http.Redirect(w, r, "/ui/signin?why=signedout", http.StatusSeeOther)
}

// render writes page name with data and status.
func (a *App) render(w http.ResponseWriter, status int, name string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := a.pages[name].ExecuteTemplate(w, "layout", data); err != nil {
		a.deps.Logger.Error().Err(err).Str("page", name).Msg("web app: render page")
	}
}

// errorView is the data of the error page.
type errorView struct {
	Viewer  *viewer
	Title   string
	Message string
	Status  int
}

// fail renders the error page.
func (a *App) fail(w http.ResponseWriter, _ *http.Request, v *viewer, status int, title, msg string) {
	a.render(w, status, "error", errorView{Viewer: v, Title: title, Message: msg, Status: status})
}

// failErr renders an error of the store or the resolver: its status and,
// for a request at fault, its reason; a server fault is logged, not shown.
func (a *App) failErr(w http.ResponseWriter, r *http.Request, v *viewer, err error) {
	status, msg := explain(err)
	if status >= http.StatusInternalServerError {
		a.deps.Logger.Error().Err(err).Str("path", r.URL.Path).Msg("web app: request failed")
	}
	a.fail(w, r, v, status, http.StatusText(status), msg)
}

// explain is the HTTP status of err, as the API answers it, and its
// reason in words.
func explain(err error) (int, string) {
	var e *engine.Error
	if !errors.As(err, &e) {
		return http.StatusInternalServerError, "Something went wrong on the server; it is in the log."
	}
	status := engine.StatusOf(e.Code)
	if status >= http.StatusInternalServerError {
		if r, ok := e.Fields["reason"].(string); ok {
			return status, r
		}
		return status, "Something went wrong on the server; it is in the log."
	}
	reason, _ := e.Fields["reason"].(string)
	if reason == "" {
		reason = e.Message
	}
	if f, ok := e.Fields["field"].(string); ok {
		if f == "reason" {
			f = "note"
		}
		reason = f + ": " + reason
	}
	return status, reason
}
