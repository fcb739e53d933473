package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"github.com/llmplat/llmplat/runtime/adminwire"
)

// A key's create outlives a killed apply: the platform commits the key, and
// Terraform dies before it writes the key (and its secret) to state. The
// next apply must not leave that key working with a secret nobody has. So a
// named key is created under an Idempotency-Key derived from its team and
// name (keyCreateKey): the next apply's create, with a newly minted secret,
// finds the key and takes it over, rotated to the new secret. Once the key is
// in state (its first refresh), the provider tells the platform to forget
// that Idempotency-Key (forgetKeyCreate), so another key of the same team
// and name, declared later, is a key of its own and never takes this one.

// privateKeyKept is the private state entry that says the platform was told
// the key's secret is kept in state.
const privateKeyKept = "create_forgotten"

// keyCreateKey is the Idempotency-Key of the create of a key named name of
// team, the same in every apply.
func keyCreateKey(team int64, name string) string {
	h := sha256.Sum256([]byte(strconv.FormatInt(team, 10) + "\x00" + name))
	return "terraform-key-" + hex.EncodeToString(h[:16])
}

// firstKeyCreate reports whether this terraform command has not sent a
// create under idem yet, and notes that it has now. A second one is another
// resource of the same team and name, which must not take the first's key.
func (d *providerData) firstKeyCreate(idem string) bool {
	if d == nil {
		return true
	}
	d.keyCreatesMu.Lock()
	defer d.keyCreatesMu.Unlock()
	if d.keyCreates[idem] {
		return false
	}
	if d.keyCreates == nil {
		d.keyCreates = map[string]bool{}
	}
	d.keyCreates[idem] = true
	return true
}

// createIdempotencyKey is the Idempotency-Key of a key's create: derived
// for a named key, the first of its team and name in this command; empty
// (a random one per create) otherwise, with a warning for a shared name.
func (r *apiKeyResource) createIdempotencyKey(team int64, name string, diags *diag.Diagnostics) string {
	if name == "" {
		return ""
	}
	idem := keyCreateKey(team, name)
	if r.data.firstKeyCreate(idem) {
		return idem
	}
	diags.AddWarning("Another key of this team has this name",
		"Another llmplat_api_key of this apply is named "+strconv.Quote(name)+" in team "+strconv.FormatInt(team, 10)+
			", so this one is created without its protection against an interrupted apply: if this apply is killed after "+
			"the create, the key is left behind (GET /admin/keys?team_id= lists it; revoke it, or adopt it with terraform "+
			"import and rotate it). Give each key of a team its own name.")
	return ""
}

// forgetKeyCreate tells the platform, once per key, that the key's secret
// is in state: its create's Idempotency-Key is forgotten, so a later create
// of the same team and name makes a key of its own.
func (r *apiKeyResource) forgetKeyCreate(ctx context.Context, id int64, private interface {
	GetKey(context.Context, string) ([]byte, diag.Diagnostics)
	SetKey(context.Context, string, []byte) diag.Diagnostics
}, diags *diag.Diagnostics) {
	kept, d := private.GetKey(ctx, privateKeyKept)
	diags.Append(d...)
	if diags.HasError() || string(kept) == "true" {
		return
	}
	if _, err := r.client.ForgetKeyCreate(ctx, id); err != nil {
		diags.AddError("API key not read", "The platform was not told the key's secret is kept: "+err.Error())
		return
	}
	diags.Append(private.SetKey(ctx, privateKeyKept, []byte("true"))...)
}

// createKeyFailure explains a refused create; a conflict on a derived
// Idempotency-Key means a killed apply left a key of this team and name
// with other settings.
func createKeyFailure(err error, team int64, name string) string {
	var ae *adminwire.APIError
	if !errors.As(err, &ae) || ae.Code != "idempotency_conflict" {
		return err.Error()
	}
	return "An earlier apply that was interrupted created a key of team " + strconv.FormatInt(team, 10) + " named " +
		strconv.Quote(name) + " with other settings, and this apply would take it over. Apply once with the settings " +
		"of that apply, or revoke that key (GET /admin/keys?team_id=" + strconv.FormatInt(team, 10) + " lists it; " +
		"DELETE /admin/keys/{id}) and apply again. " + err.Error()
}
