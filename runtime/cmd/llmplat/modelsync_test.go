package main

import (
	"bytes"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// TestModelSyncCommand: the init container's command line copies a
// revision from an S3-compatible endpoint with credentials from the
// environment, then finds it synced on the next start.
func TestModelSyncCommand(t *testing.T) {
	backend := s3mem.New()
	if err := backend.CreateBucket("weights"); err != nil {
		t.Fatal(err)
	}
	data := []byte(strings.Repeat("weights ", 4096))
	if _, err := backend.PutObject("weights", "llama-8b/r1/model.safetensors", map[string]string{}, bytes.NewReader(data), int64(len(data)), nil); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	defer srv.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	dest := t.TempDir()
	args := []string{"-bucket=weights", "-region=eu-central-1", "-model=llama-8b", "-revision=r1", "-dest=" + dest, "-endpoint=" + srv.URL}
	var out bytes.Buffer
	if err := runModelSync(t.Context(), args, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "synced: 1 files, 32768 bytes, 32768 read from S3") {
		t.Errorf("first run printed %q", out.String())
	}
	got, err := os.ReadFile(filepath.Join(dest, "llama-8b", "r1", "model.safetensors"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("copy differs: %d bytes, %v", len(got), err)
	}
	out.Reset()
	if err := runModelSync(t.Context(), args, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "already synced") {
		t.Errorf("second run printed %q", out.String())
	}
	if err := runModelSync(t.Context(), []string{"-bucket=weights", "-region=eu-central-1", "-model=llama-8b", "-revision=r2",
		"-dest=" + dest, "-endpoint=" + srv.URL}, &out); err == nil || !strings.Contains(err.Error(), "no objects under s3://weights/llama-8b/r2/") {
		t.Errorf("a missing revision: %v", err)
	}
}
