package eksllm_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// TestExampleKeepsStateInEncryptedLockedS3: examples/eks keeps its state,
// which holds the admin and internal tokens, the Redis AUTH token and
// every API key's secret, in S3, encrypted with the bootstrap stack's KMS
// key and locked by S3 native locking; what depends on the account (the
// bucket, its region, the key) comes from the bootstrap stack's
// backend_config; and the guide's step 1 creates the bucket and initialises
// the backend from it before anything is applied. The bucket's own
// properties are terraform test's (examples/eks/bootstrap/tests).
func TestExampleKeepsStateInEncryptedLockedS3(t *testing.T) {
	example := load(t, filepath.Join("..", "..", "examples", "eks"))
	var backend *hclsyntax.Block
	for _, tf := range example.blocks("terraform") {
		for _, b := range tf.Body.Blocks {
			if b.Type == "backend" {
				backend = b
			}
		}
	}
	if backend == nil || !slices.Equal(backend.Labels, []string{"s3"}) {
		t.Fatalf("examples/eks has no backend \"s3\": its state would stay on the runner's disk with every secret")
	}
	set := map[string]bool{}
	for name := range backend.Body.Attributes {
		set[name] = true
	}
	for _, name := range []string{"encrypt", "use_lockfile"} {
		if v := literal(t, attr(t, backend, name)); v.Type() != cty.Bool || !v.True() {
			t.Errorf("backend \"s3\": %s = %#v, want true", name, v)
		}
	}
	if _, ok := backend.Body.Attributes["dynamodb_table"]; ok {
		t.Error("backend \"s3\" locks with a DynamoDB table: S3 native locking (use_lockfile) needs none")
	}

	// The account's part, from the bootstrap stack's output.
	boot := load(t, filepath.Join("..", "..", "examples", "eks", "bootstrap"))
	out := attr(t, boot.block(t, "output", "backend_config"), "value")
	src := string(out.Range().SliceBytes(mustRead(t, out.Range().Filename)))
	for _, m := range regexp.MustCompile(`"(\w+)\s*= `).FindAllStringSubmatch(src, -1) {
		if set[m[1]] {
			t.Errorf("%s is set both in examples/eks's backend and by the bootstrap's backend_config", m[1])
		}
		set[m[1]] = true
	}
	for _, name := range []string{"bucket", "key", "region", "kms_key_id", "encrypt", "use_lockfile"} {
		if !set[name] {
			t.Errorf("examples/eks's backend gets no %s from its block or the bootstrap's backend_config", name)
		}
	}

	guide, err := os.ReadFile(filepath.Join("..", "..", "docs", "deploy-eks.md"))
	if err != nil {
		t.Fatal(err)
	}
	step1 := section(t, string(guide), "## 1. The AWS layer")
	order := []string{
		"cd examples/eks\n",
		"terraform -chdir=bootstrap init\n",
		"terraform -chdir=bootstrap apply\n",
		"terraform -chdir=bootstrap output -raw backend_config > backend.hcl\n",
		"terraform init -backend-config=backend.hcl\n",
		"terraform apply -target=module.eks\n",
	}
	at := 0
	for _, cmd := range order {
		i := strings.Index(step1[at:], cmd)
		if i < 0 {
			t.Fatalf("docs/deploy-eks.md step 1 does not run %q after %q", strings.TrimSpace(cmd), step1[:at])
		}
		at += i + len(cmd)
	}
	if strings.Contains(string(guide), "terraform init\n") {
		t.Error("docs/deploy-eks.md runs a terraform init without the backend's settings")
	}
}

// section is the text of a markdown section from its heading to the next
// heading of its level.
func section(t *testing.T, doc, heading string) string {
	t.Helper()
	i := strings.Index(doc, heading+"\n")
	if i < 0 {
		t.Fatalf("no section %q", heading)
	}
	rest := doc[i+len(heading):]
	if j := strings.Index(rest, "\n## "); j >= 0 {
		rest = rest[:j]
	}
	return rest
}
