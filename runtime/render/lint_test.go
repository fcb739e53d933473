package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"

	"gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llmplat/llmplat/runtime/clusterwatch"
)

// The lint's rules over rendered workloads (issue 30): each finding names
// one, and a waiver waives one.
const (
	// ruleRequests: every container and init container requests CPU and
	// memory, or the pod is BestEffort (evicted first, packed blindly).
	ruleRequests = "requests"
	// ruleImage: every image comes from a registry its publisher
	// releases to (CheckImage).
	ruleImage = "image"
	// ruleProbes: every model Deployment's containers have startup,
	// readiness and liveness probes.
	ruleProbes = "probes"
	// rulePDB: every PodDisruptionBudget keeps the last ready replica of
	// what it selects, each model has exactly one, and a model's lets an
	// unready pod go (unhealthyPodEvictionPolicy: AlwaysAllow).
	rulePDB = "pdb"
	// ruleMemory: every container of the platform's own image has a
	// memory limit and is told it (LLMPLAT_MEMORY_LIMIT from the downward
	// API), so its Go runtime keeps the heap under it (GOMEMLIMIT) rather
	// than be killed at it.
	ruleMemory = "memory"
)

// platformRepo is the repository name of the platform's own image.
const platformRepo = "llmplat"

// lintMaxReplicas bounds the replica counts the PDB rule walks: 1,000 is
// far above any max_replicas a GPU model is given.
const lintMaxReplicas = 1000

// finding is one rule broken by one object (and container).
type finding struct {
	Rule, Object, Container, Msg string
}

func (f finding) String() string {
	if f.Container != "" {
		return fmt.Sprintf("%s: %s container %s: %s", f.Rule, f.Object, f.Container, f.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", f.Rule, f.Object, f.Msg)
}

// waiver lets findings of Rule on Object's Container (path.Match
// patterns) stand, for Reason.
type waiver struct {
	Rule, Object, Container, Reason string
}

// lintWaivers are the findings the rendered workloads may have, each
// with why. A waiver that matches nothing fails the lint, so none
// outlives its reason.
var lintWaivers = []waiver{}

// lintObjects decodes rendered files into their documents, as JSON for
// the Kubernetes API types.
func lintObjects(files []File) ([]lintObject, error) {
	var out []lintObject
	for _, f := range files {
		dec := yaml.NewDecoder(bytes.NewReader(f.Data))
		for {
			var d map[string]any
			err := dec.Decode(&d)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f.Name, err)
			}
			raw, err := json.Marshal(d)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f.Name, err)
			}
			var head struct {
				Kind     string            `json:"kind"`
				Metadata metav1.ObjectMeta `json:"metadata"`
			}
			if err := json.Unmarshal(raw, &head); err != nil {
				return nil, fmt.Errorf("%s: %w", f.Name, err)
			}
			out = append(out, lintObject{File: f.Name, Kind: head.Kind, Name: head.Metadata.Name,
				Namespace: head.Metadata.Namespace, JSON: raw})
		}
	}
	return out, nil
}

// lintObject is one rendered document.
type lintObject struct {
	File, Kind, Name, Namespace string
	JSON                        []byte
}

func (o lintObject) id() string { return o.Kind + "/" + o.Name }

// workload is a pod template and the replica counts it may run.
type workload struct {
	Object, Namespace string
	Labels            map[string]string // the object's own
	Pod               corev1.PodTemplateSpec
	Min, Max          int // replicas; -1 for a DaemonSet
}

// scaledObject is what the lint reads of a KEDA ScaledObject.
type scaledObject struct {
	Spec struct {
		ScaleTargetRef struct {
			Kind string `json:"kind"`
			Name string `json:"name"`
		} `json:"scaleTargetRef"`
		MinReplicaCount *int `json:"minReplicaCount"`
		MaxReplicaCount *int `json:"maxReplicaCount"`
	} `json:"spec"`
}

// KEDA's defaults for a ScaledObject's bounds.
const (
	kedaDefaultMin = 0
	kedaDefaultMax = 100
)

// workloads reads the objects that hold pods, each Deployment's replica
// range from its fixed count or the ScaledObject that scales it.
func workloads(objs []lintObject) ([]workload, error) {
	scaled := map[string]scaledObject{} // namespace/name of the target
	for _, o := range objs {
		if o.Kind != "ScaledObject" {
			continue
		}
		var so scaledObject
		if err := json.Unmarshal(o.JSON, &so); err != nil {
			return nil, fmt.Errorf("%s: %w", o.id(), err)
		}
		if k := so.Spec.ScaleTargetRef.Kind; k == "" || k == "Deployment" {
			scaled[o.Namespace+"/"+so.Spec.ScaleTargetRef.Name] = so
		}
	}
	var out []workload
	for _, o := range objs {
		switch o.Kind {
		case "Deployment":
			var d appsv1.Deployment
			if err := json.Unmarshal(o.JSON, &d); err != nil {
				return nil, fmt.Errorf("%s: %w", o.id(), err)
			}
			w := workload{Object: o.id(), Namespace: o.Namespace, Labels: d.Labels, Pod: d.Spec.Template, Min: 1, Max: 1}
			if d.Spec.Replicas != nil {
				w.Min, w.Max = int(*d.Spec.Replicas), int(*d.Spec.Replicas)
			}
			if so, ok := scaled[o.Namespace+"/"+o.Name]; ok {
				w.Min, w.Max = kedaDefaultMin, kedaDefaultMax
				if so.Spec.MinReplicaCount != nil {
					w.Min = *so.Spec.MinReplicaCount
				}
				if so.Spec.MaxReplicaCount != nil {
					w.Max = *so.Spec.MaxReplicaCount
				}
			}
			out = append(out, w)
		case "DaemonSet":
			var d appsv1.DaemonSet
			if err := json.Unmarshal(o.JSON, &d); err != nil {
				return nil, fmt.Errorf("%s: %w", o.id(), err)
			}
			out = append(out, workload{Object: o.id(), Namespace: o.Namespace, Labels: d.Labels, Pod: d.Spec.Template, Min: -1, Max: -1})
		case "Pod", "ReplicaSet", "StatefulSet", "Job", "CronJob":
			return nil, fmt.Errorf("%s: the lint does not read a %s yet", o.id(), o.Kind)
		}
	}
	return out, nil
}

// isModel reports whether w is a model's engines (labelled as the
// orchestrators' controller finds a model).
func (w workload) isModel() bool { return w.Labels[clusterwatch.ModelLabel] != "" }

// lint applies every rule to the rendered objects and returns what
// breaks them, before waivers.
func lint(objs []lintObject) ([]finding, error) {
	ws, err := workloads(objs)
	if err != nil {
		return nil, err
	}
	var out []finding
	for _, w := range ws {
		out = append(out, lintContainers(w)...)
	}
	pdbs, err := lintPDBs(objs, ws)
	if err != nil {
		return nil, err
	}
	return append(out, pdbs...), nil
}

// lintContainers checks w's requests, images and (a model's) probes.
func lintContainers(w workload) []finding {
	var out []finding
	spec := w.Pod.Spec
	all := append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...)
	for _, c := range all {
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := c.Resources.Requests[r]; !ok || q.IsZero() {
				out = append(out, finding{ruleRequests, w.Object, c.Name, "no " + string(r) + " request"})
			}
		}
		if err := CheckImage(c.Image); c.Image == "" || err != nil {
			out = append(out, finding{ruleImage, w.Object, c.Name, fmt.Sprintf("image %q: %v", c.Image, err)})
		}
		if _, repo := splitImage(c.Image); path.Base(repo) == platformRepo {
			if msg := memoryLimitKnown(c); msg != "" {
				out = append(out, finding{ruleMemory, w.Object, c.Name, msg})
			}
		}
	}
	if !w.isModel() {
		return out
	}
	for _, c := range spec.Containers {
		for _, p := range []struct {
			name  string
			probe *corev1.Probe
		}{{"startup", c.StartupProbe}, {"readiness", c.ReadinessProbe}, {"liveness", c.LivenessProbe}} {
			if p.probe == nil {
				out = append(out, finding{ruleProbes, w.Object, c.Name, "no " + p.name + " probe"})
			}
		}
	}
	return out
}

// memoryLimitKnown says what is missing for c's Go runtime to know its
// memory limit: "" when nothing is.
func memoryLimitKnown(c corev1.Container) string {
	if q, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok || q.IsZero() {
		return "no memory limit"
	}
	for _, e := range c.Env {
		if e.Name != "LLMPLAT_MEMORY_LIMIT" {
			continue
		}
		if f := e.ValueFrom; f != nil && f.ResourceFieldRef != nil && f.ResourceFieldRef.Resource == "limits.memory" &&
			(f.ResourceFieldRef.ContainerName == "" || f.ResourceFieldRef.ContainerName == c.Name) &&
			(f.ResourceFieldRef.Divisor.IsZero() || f.ResourceFieldRef.Divisor.Value() == 1) {
			return ""
		}
		return "LLMPLAT_MEMORY_LIMIT is not its own limits.memory in bytes"
	}
	return "no LLMPLAT_MEMORY_LIMIT: its Go runtime would not know the memory limit"
}

// waive removes the findings a waiver covers and returns the rest, and
// the waivers that covered none.
func waive(fs []finding, waivers []waiver) (rest []finding, unused []waiver) {
	used := make([]bool, len(waivers))
	for _, f := range fs {
		waived := false
		for i, w := range waivers {
			if w.Rule == f.Rule && match(w.Object, f.Object) && match(w.Container, f.Container) {
				used[i], waived = true, true
			}
		}
		if !waived {
			rest = append(rest, f)
		}
	}
	for i, w := range waivers {
		if !used[i] {
			unused = append(unused, w)
		}
	}
	return rest, unused
}

// match is path.Match, with a malformed pattern matching nothing.
func match(pattern, s string) bool {
	ok, err := path.Match(pattern, s)
	return err == nil && ok
}
