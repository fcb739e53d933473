package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"

	"github.com/gin-gonic/gin"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/strictjson"
)

// Error codes of the admin API, beside the OpenAI error types.
const (
	codeInvalidJSON     = "invalid_json"
	codeUnknownField    = "unknown_field"
	codeDuplicateKey    = "duplicate_key"
	codeVariantKey      = "variant_key"
	codeInvalidValue    = "invalid_value"
	codeTooLarge        = "request_too_large"
	codeTooDeep         = "nesting_too_deep"
	codeNotFound        = "not_found"
	codeConflict        = "conflict"
	codeIdempotency     = "idempotency_conflict"
	codeKeyRevoked      = "key_revoked"
	codeInvalidAPIKey   = "invalid_api_key"
	codeMissingAPIKey   = "missing_api_key"
	codeExpiredAPIKey   = "expired_api_key"
	codeRevokedAPIKey   = "revoked_api_key"
	codeAdminRequired   = "admin_required"
	codeUnavailable     = "unavailable"
	codeNotImplemented  = "not_implemented"
	codeInternal        = "internal_error"
	codeNotPropagated   = "revocation_not_propagated"
	codeMethodForbidden = "method_not_allowed"
)

// writeJSON answers status with v as JSON.
func writeJSON(c *gin.Context, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(c, http.StatusInternalServerError, openai.TypeServer, codeInternal, "", "internal error")
		return
	}
	c.Data(status, "application/json", b)
}

// writeError answers status with an OpenAI error body and stops the chain.
func writeError(c *gin.Context, status int, typ, code, param, msg string) {
	c.Abort()
	c.Data(status, "application/json", openai.NewError(typ, code, param, msg).Marshal())
}

// badRequest answers 400 about one field.
func badRequest(c *gin.Context, code string, e *fieldError) {
	writeError(c, http.StatusBadRequest, openai.TypeInvalidRequest, code, e.param, e.msg)
}

// jsonField is one decodable field of a request struct.
type jsonField struct {
	index    []int
	nullable bool // null is a meaningful value: a pointer, slice, map or OptionalTime
}

// fieldCache maps a request struct type to its fields by exact JSON name.
var fieldCache sync.Map // reflect.Type → map[string]jsonField

// fieldsOf returns the JSON fields of struct type t.
func fieldsOf(t reflect.Type) map[string]jsonField {
	if f, ok := fieldCache.Load(t); ok {
		return f.(map[string]jsonField)
	}
	fields := make(map[string]jsonField)
	for _, sf := range reflect.VisibleFields(t) {
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if !sf.IsExported() || name == "-" || (sf.Anonymous && name == "") {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		k := sf.Type.Kind()
		fields[name] = jsonField{index: sf.Index, nullable: k == reflect.Pointer || k == reflect.Slice ||
			k == reflect.Map || sf.Type == reflect.TypeFor[adminwire.OptionalTime]()}
	}
	fieldCache.Store(t, fields)
	return fields
}

// decodeBody reads the request body into the struct dst strictly: a JSON
// object whose keys match dst's JSON names exactly, each value of the
// field's type, null only where null means something. It returns the keys
// present; on failure it has answered 400 or 413 and returns false.
func decodeBody(c *gin.Context, dst any) (map[string]bool, bool) {
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(c, http.StatusRequestEntityTooLarge, openai.TypeInvalidRequest, codeTooLarge, "",
				"request body exceeds the admin api's limit")
			return nil, false
		}
		writeError(c, http.StatusBadRequest, openai.TypeInvalidRequest, codeInvalidJSON, "", "could not read the request body")
		return nil, false
	}
	// Keys are read exactly: a key given twice ("team_id" twice: which
	// team?) or spelled as a variant of a field is refused, at any depth,
	// where encoding/json would quietly pick one.
	// Check is the first pass over the body: it bounds the depth of the
	// decodes after it.
	if err := strictjson.Check(body, reflect.TypeOf(dst).Elem()); err != nil {
		var se *strictjson.Error
		if errors.Is(err, strictjson.ErrTooDeep) {
			writeError(c, http.StatusBadRequest, openai.TypeInvalidRequest, codeTooDeep, "", fmt.Sprintf(
				"the request body nests objects and arrays deeper than %d levels", strictjson.MaxDepth))
			return nil, false
		}
		if errors.As(err, &se) {
			code := codeVariantKey
			if se.Duplicate {
				code = codeDuplicateKey
			}
			badRequest(c, code, invalid(se.Path, "%s", se.Msg))
			return nil, false
		}
		writeError(c, http.StatusBadRequest, openai.TypeInvalidRequest, codeInvalidJSON, "",
			"the request body must be one JSON object")
		return nil, false
	}
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&raw); err != nil || raw == nil || dec.More() {
		writeError(c, http.StatusBadRequest, openai.TypeInvalidRequest, codeInvalidJSON, "",
			"the request body must be one JSON object")
		return nil, false
	}
	v := reflect.ValueOf(dst).Elem()
	fields := fieldsOf(v.Type())
	present := make(map[string]bool, len(raw))
	for name, val := range raw {
		f, ok := fields[name]
		if !ok {
			badRequest(c, codeUnknownField, invalid(name, "unknown field %q", name))
			return nil, false
		}
		if !f.nullable && bytes.Equal(bytes.TrimSpace(val), []byte("null")) {
			badRequest(c, codeInvalidValue, invalid(name, "%s must not be null", name))
			return nil, false
		}
		if err := json.Unmarshal(val, v.FieldByIndex(f.index).Addr().Interface()); err != nil {
			badRequest(c, codeInvalidValue, invalid(name, "%s has the wrong type or format", name))
			return nil, false
		}
		present[name] = true
	}
	return present, true
}
