package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/terraform-plugin-log/tflogtest"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// TestAPITransportLogsCalls: each admin API call is logged with its
// method, path, status and duration, and nothing of its credentials,
// query or body reaches the log.
func TestAPITransportLogsCalls(t *testing.T) {
	const token, query, secret = "admin-token-never-logged", "query-never-logged", "llp_secret-never-logged"
	var gotUA string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotUA = r.Header.Get("User-Agent")
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	var logs bytes.Buffer
	ctx := tflogtest.RootLogger(context.Background(), &logs)
	client := &http.Client{Transport: &apiTransport{next: http.DefaultTransport, userAgent: userAgent("1.2.3", "1.11.4")}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/admin/keys?q="+query, strings.NewReader(`{"secret":"`+secret+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	if want := "terraform-provider-llmplat/1.2.3 terraform/1.11.4"; gotUA != want {
		t.Errorf("User-Agent: got %q, want %q", gotUA, want)
	}
	for _, s := range []string{token, query, secret} {
		if strings.Contains(logs.String(), s) {
			t.Errorf("the log holds %q:\n%s", s, logs.String())
		}
	}
	entries, err := tflogtest.MultilineJSONDecode(&logs)
	if err != nil {
		t.Fatal(err)
	}
	var answered map[string]any
	for _, e := range entries {
		if e["@message"] == "llmplat admin API call answered" {
			answered = e
		}
	}
	if answered == nil {
		t.Fatalf("no log entry of the answered call in %v", entries)
	}
	for field, want := range map[string]any{"method": "POST", "path": "/admin/keys", "status": float64(http.StatusCreated)} {
		if got := answered[field]; got != want {
			t.Errorf("log field %s: got %v, want %v", field, got, want)
		}
	}
	if _, ok := answered["duration_ms"].(float64); !ok {
		t.Errorf("log entry without duration_ms: %v", answered)
	}
}

// TestAccUserAgent: every admin API call of a plan and apply carries
// terraform-provider-llmplat/<version> terraform/<the running terraform's
// version>.
func TestAccUserAgent(t *testing.T) {
	p := startPlatform(t)
	var mu sync.Mutex
	agents := map[string]int{}
	proxy := newFaultProxy(t, p.URL, func(r *http.Request) fault {
		mu.Lock()
		agents[r.Header.Get("User-Agent")]++
		mu.Unlock()
		return pass
	})
	want := "terraform-provider-llmplat/test terraform/" + terraformVersion(t)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []resource.TestStep{{
			Config: p.providerBlockVia(proxy.URL, "") + "resource \"llmplat_team\" \"a\" {\n  name = \"agents\"\n}\n",
		}},
	})
	mu.Lock()
	defer mu.Unlock()
	if len(agents) != 1 || agents[want] == 0 {
		t.Errorf("User-Agents the platform received (with counts): got %v, want only %q", agents, want)
	}
}

// terraformVersion is the version of the terraform the tests run.
func terraformVersion(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(os.Getenv("TF_ACC_TERRAFORM_PATH"), "version", "-json").Output()
	if err != nil {
		t.Fatal(fmt.Errorf("terraform version: %w", err))
	}
	var v struct {
		Version string `json:"terraform_version"`
	}
	if err := json.Unmarshal(out, &v); err != nil || v.Version == "" {
		t.Fatalf("terraform version -json: %q: %v", out, err)
	}
	return v.Version
}
