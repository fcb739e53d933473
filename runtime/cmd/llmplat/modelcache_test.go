//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// stepWait bounds one init step: a few MB from an S3 server in the test
// take well under a second; this only ends a hang.
const stepWait = 2 * time.Minute

// distrolessNonroot is the "nonroot" user and group of the distroless
// base image the Dockerfile builds on.
const distrolessNonroot = 65532

// runtimeDefaultCaps are the capabilities containerd gives a container
// that names none (its default spec): what a root step would hold with
// no securityContext.
var runtimeDefaultCaps = []string{"CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID",
	"SETUID", "SETFCAP", "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE"}

// capNumbers are Linux's numbers for the capabilities above.
var capNumbers = map[string]int{"CHOWN": 0, "DAC_OVERRIDE": 1, "DAC_READ_SEARCH": 2, "FOWNER": 3, "FSETID": 4,
	"KILL": 5, "SETGID": 6, "SETUID": 7, "SETPCAP": 8, "NET_BIND_SERVICE": 10, "NET_RAW": 13,
	"SYS_CHROOT": 18, "MKNOD": 27, "AUDIT_WRITE": 29, "SETFCAP": 31}

// TestModelCacheAsTheManifestRunsIt: a model pod's init steps, read from
// the rendered manifest, run as the manifest says (user, group,
// capabilities; the image's user where it names none) against a cache
// folder laid out as kubelet makes a DirectoryOrCreate hostPath: root:root
// 0755. The revision lands whole, and a second pod on the node starts
// without reading S3. With no securityContext (the image's user, 65532,
// and a root-owned folder) modelsync could not make its first folder.
func TestModelCacheAsTheManifestRunsIt(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root", "the test starts the init steps as the users the manifest names",
			"run it as root (CI does)")
	}
	pod := renderedModelPod(t)
	imageUser := dockerfileUser(t)
	cache := filepath.Join(kubeletLayout(t), "models")
	if err := os.Mkdir(cache, 0o755); err != nil { // kubelet's DirectoryOrCreate: root:root 0755
		t.Fatal(err)
	}
	if err := os.Chmod(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	exe := copyExecutable(t, filepath.Dir(cache))
	hostPaths := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		if v.HostPath != nil {
			if v.HostPath.Type == nil || *v.HostPath.Type != corev1.HostPathDirectoryOrCreate {
				t.Fatalf("volume %s: hostPath type %v; the test lays the folder out as DirectoryOrCreate makes it", v.Name, v.HostPath.Type)
			}
			hostPaths[v.Name] = cache
		}
	}

	backend := s3mem.New()
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	defer srv.Close()
	model, rev := uploadRevision(t, backend, pod)
	env := append(os.Environ(), "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE="+filepath.Join(cache, "none"), "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(cache, "none"))

	for run, want := range []string{"synced: 1 files", "already synced"} {
		var out string
		for _, c := range pod.Spec.InitContainers {
			out = runStep(t, exe, env, srv.URL, c, pod.Spec.SecurityContext, imageUser, hostPaths)
		}
		if !strings.Contains(out, want) {
			t.Errorf("pod %d: the last init step printed %q, want %q", run+1, out, want)
		}
	}
	got, err := os.ReadFile(filepath.Join(cache, model, rev, "model.safetensors"))
	if err != nil || !bytes.Equal(got, weights) {
		t.Fatalf("the copy differs: %d bytes, %v", len(got), err)
	}
}

// weights is the revision's one file.
var weights = bytes.Repeat([]byte("weights "), 4096)

// renderedModelPod is the pod template of the 8B model's Deployment, as
// `llmplat render` writes it for examples/platform.yaml.
func renderedModelPod(t *testing.T) corev1.PodTemplateSpec {
	t.Helper()
	dir := t.TempDir()
	if err := runRender(t.Context(), []string{"-f", filepath.Join("..", "..", "..", "examples", "platform.yaml"), "-o", dir}, io.Discard); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, "model-llama-8b.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	docs := yaml.NewYAMLReader(bufio.NewReader(f))
	for {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			t.Fatal("no Deployment in model-llama-8b.yaml")
		}
		if err != nil {
			t.Fatal(err)
		}
		var d appsv1.Deployment
		if err := yaml.Unmarshal(doc, &d); err != nil {
			t.Fatal(err)
		}
		if d.Kind == "Deployment" {
			return d.Spec.Template
		}
	}
}

// dockerfileUser is the uid and gid the image runs as: the Dockerfile's
// last USER.
func dockerfileUser(t *testing.T) [2]int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	user := ""
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "USER "); ok {
			user = strings.TrimSpace(v)
		}
	}
	if user == "nonroot" || user == "nonroot:nonroot" {
		return [2]int{distrolessNonroot, distrolessNonroot}
	}
	u, g, _ := strings.Cut(user, ":")
	uid, err := strconv.Atoi(u)
	if err != nil {
		t.Fatalf("the Dockerfile's USER %q: the test knows distroless's nonroot and numeric ids", user)
	}
	gid := uid
	if g != "" {
		if gid, err = strconv.Atoi(g); err != nil {
			t.Fatalf("the Dockerfile's USER %q: numeric ids only", user)
		}
	}
	return [2]int{uid, gid}
}

// kubeletLayout is a folder for the node's side of the test, reachable by
// any user, as the path of a hostPath is on a node.
func kubeletLayout(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "modelcache-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm()&0o001 == 0 {
			t.Fatalf("%s cannot be searched by other users (%v); point TMPDIR at a folder that can", p, err)
		}
		if p == filepath.Dir(p) {
			return dir
		}
	}
}

// copyExecutable copies this test binary into dir, where every user may
// run it (go test's own folder is root's alone).
func copyExecutable(t *testing.T, dir string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "llmplat")
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return exe
}

// uploadRevision puts the revision the modelsync step names into the
// bucket it names, and returns its model and revision.
func uploadRevision(t *testing.T, backend *s3mem.Backend, pod corev1.PodTemplateSpec) (string, string) {
	t.Helper()
	flags := map[string]string{}
	for _, c := range pod.Spec.InitContainers {
		if len(c.Args) > 0 && c.Args[0] == "modelsync" {
			for _, a := range c.Args[1:] {
				k, v, _ := strings.Cut(strings.TrimPrefix(a, "-"), "=")
				flags[k] = v
			}
		}
	}
	if flags["bucket"] == "" || flags["model"] == "" || flags["revision"] == "" {
		t.Fatalf("no modelsync step with -bucket, -model and -revision: %v", flags)
	}
	if err := backend.CreateBucket(flags["bucket"]); err != nil {
		t.Fatal(err)
	}
	key := flags["model"] + "/" + flags["revision"] + "/model.safetensors"
	if _, err := backend.PutObject(flags["bucket"], key, map[string]string{}, bytes.NewReader(weights), int64(len(weights)), nil); err != nil {
		t.Fatal(err)
	}
	return flags["model"], flags["revision"]
}

// runStep runs the init container c as the manifest says, with its
// volumes' mount paths replaced by their folders here, and returns what
// it printed. It fails the test when the step fails.
func runStep(t *testing.T, exe string, env []string, s3URL string, c corev1.Container,
	podSC *corev1.PodSecurityContext, imageUser [2]int, hostPaths map[string]string) string {
	t.Helper()
	if len(c.Command) > 0 || len(c.Args) == 0 {
		t.Fatalf("init container %s: the test runs the image's entrypoint (llmplat) with args", c.Name)
	}
	args := make([]string, 0, len(c.Args)+1)
	for _, a := range c.Args {
		for _, m := range c.VolumeMounts {
			host, ok := hostPaths[m.Name]
			if !ok {
				t.Fatalf("init container %s mounts %s, which the test does not lay out", c.Name, m.Name)
			}
			if k, v, ok := strings.Cut(a, "="); ok && (v == m.MountPath || strings.HasPrefix(v, m.MountPath+"/")) {
				a = k + "=" + host + strings.TrimPrefix(v, m.MountPath)
			}
		}
		args = append(args, a)
	}
	if args[0] == "modelsync" {
		args = append(args, "-endpoint="+s3URL) // the one change: S3 is the server in the test
	}
	uid, gid := imageUser[0], imageUser[1]
	if podSC != nil && podSC.RunAsUser != nil {
		uid = int(*podSC.RunAsUser)
	}
	if podSC != nil && podSC.RunAsGroup != nil {
		gid = int(*podSC.RunAsGroup)
	}
	sc := c.SecurityContext
	if sc != nil && sc.RunAsUser != nil {
		uid = int(*sc.RunAsUser)
	}
	if sc != nil && sc.RunAsGroup != nil {
		gid = int(*sc.RunAsGroup)
	}
	if sc != nil && sc.Privileged != nil && *sc.Privileged {
		t.Fatalf("init container %s is privileged: the test does not model that", c.Name)
	}
	proc, err := json.Marshal(containerProc{Caps: capsOf(t, sc)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), stepWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(env, envAsContainer+"="+string(proc))
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("init container %s as %d:%d: %v\n%s", c.Name, uid, gid, err, out)
	}
	t.Logf("init container %s as %d:%d: %s", c.Name, uid, gid, bytes.TrimSpace(out))
	return string(out)
}

// capsOf is the capability numbers a root process of a container with sc
// holds: the runtime's default set, less what is dropped, plus what is
// added.
func capsOf(t *testing.T, sc *corev1.SecurityContext) []int {
	t.Helper()
	set := map[string]bool{}
	for _, c := range runtimeDefaultCaps {
		set[c] = true
	}
	if sc != nil && sc.Capabilities != nil {
		for _, d := range sc.Capabilities.Drop {
			if d == "ALL" {
				clear(set)
			}
			delete(set, string(d))
		}
		for _, a := range sc.Capabilities.Add {
			set[strings.TrimPrefix(string(a), "CAP_")] = true
		}
	}
	var caps []int
	for c := range set {
		n, ok := capNumbers[c]
		if !ok {
			t.Fatalf("capability %s: the test does not know its number", c)
		}
		caps = append(caps, n)
	}
	return caps
}

// TestModelCacheRefusesABadOwner: -owner must be numeric uid:gid.
func TestModelCacheRefusesABadOwner(t *testing.T) {
	for _, owner := range []string{"", "65532", "nonroot:nonroot", "65532:", "-1:0", "1:2:3", "99999999999:1"} {
		t.Run(owner, func(t *testing.T) {
			err := runModelCache(t.Context(), []string{"-dest=" + t.TempDir(), "-owner=" + owner}, io.Discard)
			if err == nil || !strings.Contains(err.Error(), "-owner") {
				t.Errorf("err = %v, want -owner refused", err)
			}
		})
	}
}
