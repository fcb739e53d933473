package openai

import (
	"encoding/json"
	"net/http"
)

// ErrorBody is the error shape every OpenAI-compatible server returns:
// {"error":{"message","type","param","code"}}.
type ErrorBody struct {
	Error Error `json:"error"`
}

// Error is the inside of an ErrorBody. Code is a string for OpenAI's own API
// ("rate_limit_exceeded") and the HTTP status as an integer for vLLM; it is
// kept raw so both round-trip.
type Error struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Param   *string         `json:"param"`
	Code    json.RawMessage `json:"code"`
}

// Error types as OpenAI names them.
const (
	TypeInvalidRequest = "invalid_request_error"
	TypeAuthentication = "authentication_error"
	TypePermission     = "permission_error"
	TypeNotFound       = "not_found_error"
	TypeRateLimit      = "rate_limit_error"
	TypeInsufficient   = "insufficient_quota"
	TypeServer         = "server_error"
	TypeUnavailable    = "service_unavailable_error"
)

// NewError returns an error body in OpenAI's style: a string code (or null
// when code is empty) and the param that caused it (or null).
func NewError(typ, code, param, msg string) *ErrorBody {
	e := &ErrorBody{Error: Error{Message: msg, Type: typ, Code: null}}
	if code != "" {
		e.Error.Code, _ = json.Marshal(code) // a string always marshals
	}
	if param != "" {
		e.Error.Param = &param
	}
	return e
}

// NewEngineError returns an error body in vLLM's style: the type named after
// the HTTP status (BadRequestError, NotFoundError, …) and the status as an
// integer code.
func NewEngineError(status int, param, msg string) *ErrorBody {
	code, _ := json.Marshal(status) // an int always marshals
	e := &ErrorBody{Error: Error{Message: msg, Type: engineErrorType(status), Code: code}}
	if param != "" {
		e.Error.Param = &param
	}
	return e
}

func engineErrorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "BadRequestError"
	case http.StatusNotFound:
		return "NotFoundError"
	case http.StatusServiceUnavailable:
		return "ServiceUnavailableError"
	case http.StatusRequestTimeout:
		return "TimeoutError"
	default:
		return "InternalServerError"
	}
}

// Status returns the HTTP status an error body carries as an integer code,
// or 0 when its code is a string or absent.
func (e *Error) Status() int {
	var n int
	if json.Unmarshal(e.Code, &n) != nil {
		return 0
	}
	return n
}

// Marshal returns the body's JSON.
func (e *ErrorBody) Marshal() []byte {
	b, _ := json.Marshal(e) // only strings and raw JSON we built
	return b
}
