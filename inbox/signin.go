package inbox

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// signinView is the data of the sign-in page.
type signinView struct {
	Viewer  *viewer
	CSRF    string
	Next    string
	Notice  string // why the person is here (signed out, session ended)
	Problem string // why the last attempt failed
}

// notices say why a person was sent to the sign-in page.
var notices = map[string]string{
	"expired":   "Your session has ended. Sign in again.",
	"revoked":   "Your token is no longer listed in SVC_RESOLVER_TOKENS: your session was ended.",
	"signedout": "You are signed out.",
}

// signinCSRF returns the sign-in form's CSRF token, from its cookie, or a
// fresh one it sets.
func (a *App) signinCSRF(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(signinCookie); err == nil && len(c.Value) == 43 {
		return c.Value
	}
	tok := randomToken()
	a.setCookie(w, r, signinCookie, tok, 3600)
	return tok
}

func (a *App) handleSigninPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	a.render(w, http.StatusOK, "signin", signinView{CSRF: a.signinCSRF(w, r), Next: localNext(q.Get("next")),
		Notice: notices[q.Get("why")]})
}

// handleSignin signs a person in with their resolver token: rate limited
// per client address, CSRF-checked (double submit), the operator token
// refused, the token looked up as the API looks it up.
func (a *App) handleSignin(w http.ResponseWriter, r *http.Request) {
	formErr := readForm(w, r)
	again := func(status int, problem string) {
		a.render(w, status, "signin", signinView{CSRF: a.signinCSRF(w, r), Next: localNext(r.PostFormValue("next")),
			Problem: problem})
	}
	if ok, wait := a.limit.allow(r, a.deps.Now()); !ok {
		secs := int(math.Ceil(wait.Seconds()))
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		again(http.StatusTooManyRequests, "Too many sign-in attempts from your address: wait "+strconv.Itoa(secs)+
			" seconds and try again.")
		return
	}
	if formErr != nil {
		again(http.StatusBadRequest, "The form could not be read: "+formErr.Error()+".")
		return
	}
	c, _ := r.Cookie(signinCookie) // nil when absent
	if c == nil || !sameSecret(r.PostFormValue("csrf"), c.Value) {
		again(http.StatusForbidden, "This form's CSRF token is missing or does not match: nothing was done. Try again.")
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	if sameSecret(token, a.cfg.AuthToken) {
		a.deps.Logger.Warn().Str("remote", r.RemoteAddr).Msg("web app: sign-in with the operator token refused")
		again(http.StatusForbidden, "That is the operator token (SVC_AUTH_TOKEN): it does not sign in as a person. "+
			"Sign in with your own resolver token.")
		return
	}
	p, ok, err := a.deps.Resolver.Identify(token)
	if err != nil {
		a.deps.Logger.Error().Err(err).Msg("web app: resolver tokens cannot be read")
		again(http.StatusInternalServerError, "SVC_RESOLVER_TOKENS cannot be read or parsed: nobody can sign in until the operator fixes it.")
		return
	}
	if !ok {
		a.deps.Logger.Warn().Str("remote", r.RemoteAddr).Bool("credential_presented", token != "").
			Msg("web app: sign-in refused: not a resolver token")
		again(http.StatusUnauthorized, "That token is not a resolver token listed in SVC_RESOLVER_TOKENS.")
		return
	}
	se, err := a.sessions.open(token, a.deps.Now())
	if errors.Is(err, errTooManySessions) {
		again(http.StatusServiceUnavailable, "Too many sessions are open: try again later.")
		return
	}
	a.deps.Logger.Info().Str("principal", p.String()).Msg("web app: signed in")
	a.setCookie(w, r, sessionCookie, a.sessions.cookieValue(se), int(a.cfg.SessionTTL.Seconds()))
	a.setCookie(w, r, signinCookie, "", -1)
	http.Redirect(w, r, localNext(r.PostFormValue("next")), http.StatusSeeOther)
}
