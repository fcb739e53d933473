package eksllm_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// TestPlatformSecretCarriesNoDatabasePassword: RDS rotates the database
// password every 7 days, so the in-cluster layer's Secret (read by the
// gateway and the orchestrator through envFrom) must not hold a copy: no
// read of the database's secret value, a URL made without a password, and
// the secret's ARN for the processes to read the current password from.
// (The AWS layer's half, the role that may read that secret, is asserted
// by terraform test: tests/aws_layer.tftest.hcl.)
func TestPlatformSecretCarriesNoDatabasePassword(t *testing.T) {
	addons := load(t, "cluster-addons")
	for _, bl := range addons.blocks("data") {
		if bl.Labels[0] == "aws_secretsmanager_secret_version" && slices.Contains(refs(attr(t, bl, "secret_id")), "var.cluster.database.secret_arn") {
			t.Errorf("data.%s.%s reads the database password into Terraform: it would be stale after the first rotation", bl.Labels[0], bl.Labels[1])
		}
	}
	url := addons.locals()["database_url"]
	if url == nil {
		t.Fatal("cluster-addons has no local.database_url")
	}
	for _, r := range refs(url) {
		if strings.Contains(r, "password") || strings.HasPrefix(r, "data.") || strings.HasPrefix(r, "local.database_credentials") {
			t.Errorf("local.database_url uses %s: the URL must carry no password", r)
		}
	}
	format, ok := url.(*hclsyntax.FunctionCallExpr)
	if !ok || format.Name != "format" {
		t.Fatal("local.database_url is not a format() call")
	}
	if got := literal(t, format.Args[0]).AsString(); strings.Contains(got, ":%s@") || !strings.HasPrefix(got, "postgres://%s@") {
		t.Errorf("local.database_url format %q, want postgres://<user>@… with no password", got)
	}

	secret := addons.block(t, "resource", "kubernetes_secret_v1", "llmplat")
	data := attr(t, secret, "data").(*hclsyntax.ObjectConsExpr)
	values := map[string][]string{}
	for _, item := range data.Items {
		values[literal(t, item.KeyExpr).AsString()] = refs(item.ValueExpr)
	}
	if got := values["LLMPLAT_DATABASE_PASSWORD_SECRET"]; !slices.Equal(got, []string{"var.cluster.database.secret_arn"}) {
		t.Errorf("the Secret's LLMPLAT_DATABASE_PASSWORD_SECRET is %v, want var.cluster.database.secret_arn", got)
	}
	if got := values["LLMPLAT_DATABASE_URL"]; !slices.Equal(got, []string{"local.database_url"}) {
		t.Errorf("the Secret's LLMPLAT_DATABASE_URL is %v, want local.database_url", got)
	}
}
