package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmplat/llmplat/runtime/capacity"
)

// platformExample is the shipped platform description.
var platformExample = filepath.Join("..", "..", "..", "examples", "platform.yaml")

// TestRunPlanPlatformQuota: `llmplat plan -f` plans the platform's models
// with their spot declarations and prints the vCPU quota to request: every
// model at max_replicas on its smallest g6e (8 × 4 + 5 × 48 + 3 × 48 = 416
// on demand), the spot-allowed 8B alone in the spot quota (8 × 4 = 32).
func TestRunPlanPlatformQuota(t *testing.T) {
	var out bytes.Buffer
	if err := runPlan(context.Background(), []string{"-f", platformExample, "--format", "json"}, &out); err != nil {
		t.Fatal(err)
	}
	var res capacity.Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("decode plan json: %v", err)
	}
	got := map[string]int{}
	for _, q := range res.Quota.Quotas {
		got[q.Name] = q.VCPUs
	}
	want := map[string]int{capacity.OnDemandQuotaName(capacity.QuotaClassG): 416, capacity.SpotQuotaName(capacity.QuotaClassG): 32}
	if len(got) != len(want) || got[capacity.OnDemandQuotaName(capacity.QuotaClassG)] != 416 || got[capacity.SpotQuotaName(capacity.QuotaClassG)] != 32 {
		t.Errorf("quotas %v, want %v", got, want)
	}
	out.Reset()
	if err := runPlan(context.Background(), []string{"-f", platformExample}, &out); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"Running On-Demand G and VT instances  416", "All G and VT Spot Instance Requests   32"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("table lacks %q:\n%s", line, out.String())
		}
	}
}

// TestRunPlanUpload: the upload commands come from the same declaration
// the planner sized: the 70B uploads its FP8 checkpoint, under its
// revision, where modelsync reads it.
func TestRunPlanUpload(t *testing.T) {
	var out bytes.Buffer
	if err := runPlan(context.Background(), []string{"-f", platformExample, "--format", "upload"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"hf download " + capacity.Llama70BFP8.Weights + " --local-dir weights/llama-70b/2024-07-23\n",
		"aws s3 sync weights/llama-70b/2024-07-23 s3://$BUCKET/llama-70b/2024-07-23/\n",
		"hf download " + capacity.Llama8B.Weights + " --local-dir weights/llama-8b/2024-07-23\n",
		"hf download " + capacity.Qwen32B.Weights + " --local-dir weights/qwen-32b/2024-09-19\n",
		"(fp8, 65.8 GiB), served as " + capacity.Llama70BFP8.ServedName,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("upload commands lack %q:\n%s", want, out.String())
		}
	}
}

func TestRunPlanPlatformErrors(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr error
	}{
		{"upload without a platform", []string{"--format", "upload"}, errUploadNeedsPlatform},
		{"config and platform", []string{"--config", customExample, "-f", platformExample}, errConflictingInputs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := runPlan(context.Background(), tt.args, &bytes.Buffer{}); !errors.Is(got, tt.wantErr) {
				t.Errorf("got %v, want %v", got, tt.wantErr)
			}
		})
	}
}

// TestGuideShowsRealQuotaAndUploads keeps docs/deploy-eks.md honest: the
// quota it tells readers to request, what the platform costs when idle and
// the upload commands it shows are what `llmplat plan -f
// examples/platform.yaml` prints, byte for byte.
func TestGuideShowsRealQuotaAndUploads(t *testing.T) {
	guide, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "deploy-eks.md"))
	if err != nil {
		t.Fatal(err)
	}
	var table, upload bytes.Buffer
	if err := runPlan(context.Background(), []string{"-f", platformExample}, &table); err != nil {
		t.Fatal(err)
	}
	if err := runPlan(context.Background(), []string{"-f", platformExample, "--format", "upload"}, &upload); err != nil {
		t.Fatal(err)
	}
	// section is the plan's text from one heading to the next, indented as
	// the guide's list item shows it (indent "  ") or not.
	section := func(from, to, indent string) string {
		start := strings.Index(table.String(), from)
		end := strings.Index(table.String(), to)
		if start < 0 || end < start {
			t.Fatalf("plan output has no section %q:\n%s", from, table.String())
		}
		var b strings.Builder
		for _, line := range strings.SplitAfter(strings.TrimRight(table.String()[start:end], "\n")+"\n", "\n") {
			if strings.TrimSpace(line) != "" {
				b.WriteString(indent)
			}
			b.WriteString(line)
		}
		return b.String()
	}
	for name, want := range map[string]string{
		"quota section":   "```\n" + section("EC2 vCPU quota", "\nWhat it costs when idle", "  ") + "  ```",
		"idle cost":       "```text\n" + section("What it costs when idle", "\nWarnings", "") + "```",
		"upload commands": "```sh\n" + upload.String() + "```",
	} {
		if !strings.Contains(string(guide), want) {
			t.Errorf("docs/deploy-eks.md does not show the %s verbatim:\n%s", name, want)
		}
	}
}

// TestGuideBuildsTheImageForTheNodesAndDeploysItByDigest checks, by
// text (no Docker engine runs here), the EKS guide's image step: the build
// is for the nodes' architecture whatever the builder's (every GPU and
// system node is x86_64; a laptop's arm64 binary fails there with "exec
// format error"), the Dockerfile cross-compiles from the builder's platform
// rather than emulating, and the image is deployed by the digest its push
// printed, not by a tag a later push moves.
func TestGuideBuildsTheImageForTheNodesAndDeploysItByDigest(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "..", "..", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	guide, dockerfile := read("docs/deploy-eks.md"), read("Dockerfile")
	for what, want := range map[string]string{
		"a build for the nodes' architecture":        "docker build --platform linux/amd64 ",
		"the pushed image's digest printed":          "docker inspect --format '{{index .RepoDigests 0}}' ",
		"the platform image pinned by that digest":   "llmplat@sha256:<digest>",
		"the digest set where examples/eks reads it": "images = { platform = ",
	} {
		if !strings.Contains(guide, want) {
			t.Errorf("docs/deploy-eks.md does not show %s (%q)", what, want)
		}
	}
	for what, want := range map[string]string{
		"a build stage on the builder's platform": "FROM --platform=$BUILDPLATFORM ",
		"a cross-compile to the target's":         "GOOS=$TARGETOS GOARCH=$TARGETARCH go build",
	} {
		if !strings.Contains(dockerfile, want) {
			t.Errorf("the Dockerfile has no %s (%q)", what, want)
		}
	}
}

// TestGuideCopiesTheEngineIntoECRAndDeploysItByDigest checks, by text,
// the EKS guide's engine step (issue 43, 3): after step 1's apply, vLLM's
// image is copied into the module's ECR repository (GPU nodes pulling
// ~10 GB anonymously from Docker Hub behind one NAT address meet its rate
// limit) and deployed by the digest ECR reports, through the example's
// engine_digest and its output engine_repository_url.
func TestGuideCopiesTheEngineIntoECRAndDeploysItByDigest(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "..", "..", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	guide := read("docs/deploy-eks.md")
	start, end := strings.Index(guide, "## 1. The AWS layer\n"), strings.Index(guide, "## 2. The charts\n")
	if start < 0 || end < start {
		t.Fatal("docs/deploy-eks.md has no step 1 followed by step 2")
	}
	step1 := guide[start:end]
	// In this order, after the AWS layer exists.
	at := 0
	for _, want := range []string{
		"terraform apply -target=module.eks\n",
		"repo=$(terraform output -raw engine_repository_url)\n",
		`aws ecr get-login-password | docker login --username AWS --password-stdin "${repo%%/*}"` + "\n",
		`docker buildx imagetools create --tag "$repo:v0.10.1" vllm/vllm-openai:v0.10.1` + "\n",
		`aws ecr describe-images --repository-name "${repo#*/}" --image-ids imageTag=v0.10.1`,
		"--query 'imageDetails[0].imageDigest' --output text\n",
		`engine_digest = "sha256:<digest>"`,
	} {
		i := strings.Index(step1[at:], want)
		if i < 0 {
			t.Fatalf("docs/deploy-eks.md step 1 does not show %q after %q", want, step1[:at])
		}
		at += i + len(want)
	}
	for file, want := range map[string]string{
		"examples/eks/outputs.tf":   `output "engine_repository_url"`,
		"examples/eks/variables.tf": `variable "engine_digest"`,
		"examples/eks/main.tf":      `engine        = coalesce(var.images.engine, "${module.eks.engine_repository_url}@${var.engine_digest}")`,
	} {
		if !strings.Contains(read(file), want) {
			t.Errorf("%s has no %s, which the guide's engine step uses", file, want)
		}
	}
}
