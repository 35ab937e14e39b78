package engine

import (
	"errors"
	"fmt"
	"net/http"
)

// Error codes, each mapped to one HTTP status in statusOf.
const (
	EINVALID      = "invalid_request"
	ENOTFOUND     = "not_found"
	ECONFLICT     = "conflict"
	EUNAUTHORIZED = "unauthorized"
	EFORBIDDEN    = "forbidden"
	EINTERNAL     = "internal_error"
)

// Sentinel errors returned by stores; wrap them with context.
var (
	ErrNotFound = &Error{Code: ENOTFOUND, Message: "not found"}
	ErrConflict = &Error{Code: ECONFLICT, Message: "conflict"}
	// ErrIdenticalHold refuses to create a hold while one of the same
	// binding awaits approval or redemption (Holds); its Fields name that
	// hold_id.
	ErrIdenticalHold = &Error{Code: ECONFLICT, Name: "identical_hold", Message: "an identical hold is live"}
)

// Error is an application error with a machine-readable code. Name, when
// set, replaces the code as the "error" value of the response body, and
// Fields are added to the body (e.g. field, hold_id, status, remedy).
type Error struct {
	Code    string
	Name    string
	Message string
	Fields  map[string]any
}

// Error implements error.
func (e *Error) Error() string {
	if e.Name != "" {
		return fmt.Sprintf("%s: %s", e.Name, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Is matches errors of the same code, so errors.Is(err, ErrNotFound) holds
// for any not-found error.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && (t.Name == "" || t.Name == e.Name)
}

// Errorf builds an *Error with a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, or
// EINTERNAL.
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// StatusOf is the HTTP status of an error code, as the API answers it.
func StatusOf(code string) int { return statusOf(code) }

func statusOf(code string) int {
	switch code {
	case EINVALID:
		return http.StatusBadRequest
	case ENOTFOUND:
		return http.StatusNotFound
	case ECONFLICT:
		return http.StatusConflict
	case EUNAUTHORIZED:
		return http.StatusUnauthorized
	case EFORBIDDEN:
		return http.StatusForbidden
	}
	return http.StatusInternalServerError
}
