package admin

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/llmplat/llmplat/runtime/adminwire"
)

// pathName reads the model or node name path parameter; on failure it has
// answered 400.
func pathName(c *gin.Context, name string) (string, bool) {
	v := c.Param(name)
	if e := checkIdent(name, v); e != nil {
		badRequest(c, codeInvalidValue, e)
		return "", false
	}
	return v, true
}

// createOnly reads adminwire.CreateOnlyHeader and, for a create-only
// request, its Idempotency-Key (idempotencyKey); on a value other than
// adminwire.CreateOnlyValue, or a bad key, it has answered 400.
func createOnly(c *gin.Context) (only bool, idem string, ok bool) {
	v, set := c.Request.Header[adminwire.CreateOnlyHeader]
	switch {
	case !set:
		return false, "", true
	case len(v) == 1 && v[0] == adminwire.CreateOnlyValue:
		idem, ok = idempotencyKey(c)
		return ok, idem, ok
	}
	badRequest(c, codeInvalidValue, invalid(adminwire.CreateOnlyHeader, "%s supports only %q (create only)",
		adminwire.CreateOnlyHeader, adminwire.CreateOnlyValue))
	return false, "", false
}

// putModel is PUT /admin/models/{name}: 201 when created, 200 when updated
// or already as asked; create only (adminwire.CreateOnlyHeader), 409 when
// the model exists and 200 for a repeat of its Idempotency-Key.
func (a *API) putModel(c *gin.Context) {
	name, ok := pathName(c, "name")
	if !ok {
		return
	}
	only, idem, ok := createOnly(c)
	if !ok {
		return
	}
	var spec adminwire.ModelSpec
	present, ok := decodeBody(c, &spec)
	if !ok {
		return
	}
	if e := validateModel(&spec, present); e != nil {
		badRequest(c, codeInvalidValue, e)
		return
	}
	var (
		m       adminwire.Model
		created bool
		err     error
	)
	if only {
		m, created, err = a.store.CreateModel(c.Request.Context(), name, spec, idem, a.now())
	} else {
		m, created, err = a.store.PutModel(c.Request.Context(), name, spec, a.now())
	}
	if err != nil {
		a.fail(c, err, paramFor(err, "name", adminwire.IdempotencyHeader), "model")
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(c, status, m)
}

// listModels is GET /admin/models.
func (a *API) listModels(c *gin.Context) {
	models, err := a.store.ListModels(c.Request.Context())
	if err != nil {
		a.fail(c, err, "", "model")
		return
	}
	writeJSON(c, http.StatusOK, adminwire.List[adminwire.Model]{Data: models})
}

// getModel is GET /admin/models/{name}.
func (a *API) getModel(c *gin.Context) {
	name, ok := pathName(c, "name")
	if !ok {
		return
	}
	m, err := a.store.GetModel(c.Request.Context(), name)
	if err != nil {
		a.fail(c, err, "name", "model")
		return
	}
	writeJSON(c, http.StatusOK, m)
}

// deleteModel is DELETE /admin/models/{name}: 204, or 404 when absent.
func (a *API) deleteModel(c *gin.Context) {
	name, ok := pathName(c, "name")
	if !ok {
		return
	}
	if err := a.store.DeleteModel(c.Request.Context(), name); err != nil {
		a.fail(c, err, "name", "model")
		return
	}
	c.Status(http.StatusNoContent)
}
