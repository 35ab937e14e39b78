package inbox

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Cookies of the app, both HttpOnly, SameSite=Strict, on path /ui/.
const (
	// sessionCookie carries a signed-in session: id, expiry, signature.
	sessionCookie = "svc_ui_session"
	// signinCookie carries the CSRF token of the sign-in form, before any
	// session exists (double submit).
	signinCookie = "svc_ui_signin"
)

// maxSessions bounds the sessions kept in memory; sign-in is refused
// while that many are live.
const maxSessions = 4096

// errTooManySessions refuses a sign-in while maxSessions are live.
var errTooManySessions = errors.New("too many sessions are open; try again later")

var b64 = base64.RawURLEncoding

// session is one signed-in person. The token is re-checked against
// SVC_RESOLVER_TOKENS on every request; it never leaves the server.
type session struct {
	id      string
	token   string
	csrf    string
	expires time.Time
}

// sessions are the live sessions of the process and the key their
// cookies are signed with.
type sessions struct {
	mu  sync.Mutex
	m   map[string]*session
	key []byte
	ttl time.Duration
}

func newSessions(ttl time.Duration) *sessions {
	return &sessions{m: map[string]*session{}, key: randomBytes(32), ttl: ttl}
}

// randomBytes returns n bytes from crypto/rand (which never fails).
func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// randomToken is 32 random bytes, base64url.
func randomToken() string { return b64.EncodeToString(randomBytes(32)) }

// open starts a session for token at now and returns it.
func (s *sessions) open(token string, now time.Time) (*session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) >= maxSessions {
		for id, old := range s.m {
			if !now.Before(old.expires) {
				delete(s.m, id)
			}
		}
		if len(s.m) >= maxSessions {
			return nil, errTooManySessions
		}
	}
	se := &session{id: randomToken(), token: token, csrf: randomToken(), expires: now.Add(s.ttl)}
	s.m[se.id] = se
	return se, nil
}

// end forgets session id.
func (s *sessions) end(id string) {
	s.mu.Lock()
	delete(s.m, id)
	s.mu.Unlock()
}

// sign is the cookie signature of a session id and expiry.
func (s *sessions) sign(id string, exp int64) string {
	mac := hmac.New(sha256.New, s.key)
	mac.Write([]byte(id + "." + strconv.FormatInt(exp, 10)))
	return b64.EncodeToString(mac.Sum(nil))
}

// cookieValue is id.expiry.signature.
func (s *sessions) cookieValue(se *session) string {
	exp := se.expires.Unix()
	return se.id + "." + strconv.FormatInt(exp, 10) + "." + s.sign(se.id, exp)
}

// lookup returns the live session of a cookie value: its signature must
// verify, its expiry must lie ahead, and the session must still be open.
func (s *sessions) lookup(value string, now time.Time) (*session, bool) {
	parts := strings.Split(value, ".")
	if len(parts) != 3 {
		return nil, false
	}
	exp, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || parts[1] != strconv.FormatInt(exp, 10) || !hmac.Equal([]byte(parts[2]), []byte(s.sign(parts[0], exp))) || now.Unix() >= exp {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	se, ok := s.m[parts[0]]
	if !ok || !now.Before(se.expires) {
		delete(s.m, parts[0])
		return nil, false
	}
	return se, true
}

// sameSecret compares two secrets in constant time; empty never matches.
func sameSecret(a, b string) bool {
	return a != "" && b != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// setCookie sets an HttpOnly, SameSite=Strict cookie on /ui/, Secure when
// the request came over TLS (or the public URL is https); maxAge < 0
// deletes it.
func (a *App) setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/ui/", MaxAge: maxAge, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: a.secure(r)})
}

// secure reports whether the app's cookies of r must be Secure.
func (a *App) secure(r *http.Request) bool {
	return r.TLS != nil || strings.HasPrefix(a.cfg.PublicURL, "https://")
}
