// Package admin is the platform's admin API and the SQL stores behind it.
// Its wire types (request and answer bodies, APIError) live in
// runtime/adminwire and its typed client in runtime/adminclient, so that a
// client (the Terraform provider) links neither this package's server nor
// its stores.
//
// The API (API, mounted under /admin with Register or served alone by
// Handler) manages teams, credit grants, API keys, models, on-prem node
// tokens and the nodes view. Every route requires an admin principal; bodies
// are strict JSON (unknown fields are refused) and errors use the OpenAI
// shape {"error":{"message","type","param","code"}}, param naming the field
// at fault. Money is integer micro-credits (1 credit = 1,000,000), never a
// float or a decimal string, so amounts stay exact end to end. The rules a
// request's values must meet live in runtime/adminrules, which the Terraform
// provider applies at plan with the same messages.
//
// Creates are safe to retry, which the Terraform provider relies on: a team
// is idempotent by name, a credit grant by its idempotency_key, a model by
// its name (PUT is an upsert), and an API key or node token by the
// Idempotency-Key header. A replayed key or token create returns the record
// without its secret: only the secret's SHA-256 is stored, so the secret can
// be shown once and never again. A client that must not lose a secret to a
// lost answer mints it (llp_ or llpnode_ and 43 base62 characters, checked
// as strictly as a generated one) and sends it with the create (the key's
// "key", the node token's "token"): the answer never carries it, and a
// replay loses nothing. The provider always does. A repeat that brings
// another minted secret comes from a client that lost the first one (a
// process killed after the commit): it takes the key over, rotated to the
// new secret, so no key is left working with a secret nobody has; once the
// client has kept the secret it says so (DELETE
// /admin/keys/{id}/idempotency-key), and the Idempotency-Key is forgotten.
//
// SQLStore implements auth.KeyStore and auth.TeamStore over runtime/store on
// PostgreSQL and SQLite: a NULL limit reads as 0 (unlimited) and an empty
// model_allowlist allows every model, as auth.Limits defines. SQLNodeTokens
// issues, lists, revokes and verifies per-node tokens for the orchestrator.
//
// A node declaration (PUT /admin/nodes/{id}/declaration) is what an operator
// declared for a node: its agent's command line inputs and inventory fields
// (gpu_count, labels). It is stored beside, not in, what the agent
// registers, shown in the nodes view as "declared", and read back by the
// provider's import; its gpu_count is shown beside the registered count,
// never enforced.
package admin
