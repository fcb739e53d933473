package twin

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llmplat/llmplat/runtime/clusterwatch"
)

// Substitution is one change the twin makes to the production objects
// (llmplat render's output) before it applies them, and why. The list is
// all there is: TestSubstitutionsAreAllThatDiffers fails when an applied
// object differs from its rendered self anywhere the list does not name.
type Substitution struct {
	// Name says what changes.
	Name string
	// Why the twin needs it.
	Why string
	// Kind is the kind of object it applies to; Names, when set, the only
	// names.
	Kind  string
	Names []string
	// Paths are the fields it may change, dot-separated, "*" for any list
	// item or map key; "-" alone means the object is not applied at all,
	// "kind" that it is replaced by another kind's object.
	Paths []string
	apply func(s Env, o *unstructured.Unstructured) (*unstructured.Unstructured, error)
}

// Scaler is the twin's time scale.
type Scaler interface {
	// Dur is a real-world duration on the twin's clock.
	Dur(time.Duration) time.Duration
}

// Env is what the substitutions need of the twin.
type Env struct {
	Scaler
	// PrometheusURL is the twin's Prometheus (empty: left as rendered).
	PrometheusURL string
}

// kwokNodeClass names the twin's node class: KWOK nodes of the instance
// types Karpenter's kwok provider is given.
const kwokNodeClass = "gpu"

// defaultProgressDeadline is the API server's default of a Deployment's
// progressDeadlineSeconds, which the twin scales like any other period.
const defaultProgressDeadline = 600 * time.Second

// Substitutions is the twin's one list of changes to production objects.
var Substitutions = []Substitution{
	{Name: "EC2NodeClass → KWOKNodeClass", Kind: "EC2NodeClass", Paths: []string{"kind"},
		Why: "the twin's nodes are KWOK nodes that Karpenter's kwok provider launches; an EC2NodeClass needs AWS",
		apply: func(_ Env, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
			n := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass",
				"metadata": map[string]any{"name": o.GetName()}}}
			return n, nil
		}},
	{Name: "NodePool's nodeClassRef → the KWOKNodeClass", Kind: "NodePool",
		Paths: []string{"spec.template.spec.nodeClassRef.group", "spec.template.spec.nodeClassRef.kind"},
		Why:   "the NodePool launches KWOK nodes; its requirements, limits, taints and budgets are production's",
		apply: func(_ Env, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
			ref := []string{"spec", "template", "spec", "nodeClassRef"}
			if err := unstructured.SetNestedField(o.Object, "karpenter.kwok.sh", append(ref, "group")...); err != nil {
				return nil, err
			}
			return o, unstructured.SetNestedField(o.Object, "KWOKNodeClass", append(ref, "kind")...)
		}},
	{Name: "NodePool's periods on the twin's clock", Kind: "NodePool",
		Paths: []string{"spec.disruption.consolidateAfter", "spec.template.spec.expireAfter", "spec.template.spec.terminationGracePeriod"},
		Why:   "one time scale for the whole twin",
		apply: func(s Env, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
			return o, scaleDurations(s, o, [][]string{{"spec", "disruption", "consolidateAfter"},
				{"spec", "template", "spec", "expireAfter"}, {"spec", "template", "spec", "terminationGracePeriod"}})
		}},
	{Name: "ScaledObject's periods on the twin's clock", Kind: "ScaledObject",
		Paths: []string{"spec.pollingInterval", "spec.cooldownPeriod",
			"spec.advanced.horizontalPodAutoscalerConfig.behavior.*.stabilizationWindowSeconds",
			"spec.advanced.horizontalPodAutoscalerConfig.behavior.*.policies.*.periodSeconds"},
		Why: "one time scale for the whole twin (KEDA counts in whole seconds: at least 1)",
		apply: func(s Env, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
			if err := scaleSeconds(s, o.Object, []string{"spec", "pollingInterval"}, []string{"spec", "cooldownPeriod"}); err != nil {
				return nil, err
			}
			behavior, _, _ := unstructured.NestedMap(o.Object, "spec", "advanced", "horizontalPodAutoscalerConfig", "behavior")
			for dir := range behavior {
				rules := []string{"spec", "advanced", "horizontalPodAutoscalerConfig", "behavior", dir}
				if err := scaleSeconds(s, o.Object, append(rules, "stabilizationWindowSeconds")); err != nil {
					return nil, err
				}
				policies, _, _ := unstructured.NestedSlice(o.Object, append(rules, "policies")...)
				for _, p := range policies {
					if pm, ok := p.(map[string]any); ok {
						if err := scaleSeconds(s, pm, []string{"periodSeconds"}); err != nil {
							return nil, err
						}
					}
				}
				if err := unstructured.SetNestedSlice(o.Object, policies, append(rules, "policies")...); err != nil {
					return nil, err
				}
			}
			return o, nil
		}},
	{Name: "ScaledObject's demand forecast on the twin's clock", Kind: "ScaledObject", Paths: []string{"spec.triggers.*.metadata.query"},
		Why: "the forecast's regression window and step, and the cold start it looks ahead, are periods: one time scale for the whole twin",
		apply: func(s Env, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
			triggers, _, _ := unstructured.NestedSlice(o.Object, "spec", "triggers")
			for _, t := range triggers {
				md, ok := t.(map[string]any)["metadata"].(map[string]any)
				if q, isString := md["query"].(string); ok && isString && strings.Contains(q, "deriv(") {
					scaled, err := scaleForecast(s, q)
					if err != nil {
						return nil, err
					}
					md["query"] = scaled
				}
			}
			return o, unstructured.SetNestedSlice(o.Object, triggers, "spec", "triggers")
		}},
	{Name: "ScaledObject's Prometheus → the twin's", Kind: "ScaledObject", Paths: []string{"spec.triggers.*.metadata.serverAddress"},
		Why: "the twin's Prometheus scrapes the same engines' and orchestrators' metrics at their addresses; the rendered URL names kube-prometheus-stack's Service, which the twin does not run",
		apply: func(s Env, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
			if s.PrometheusURL == "" {
				return o, nil
			}
			triggers, _, _ := unstructured.NestedSlice(o.Object, "spec", "triggers")
			for _, t := range triggers {
				if md, ok := t.(map[string]any)["metadata"].(map[string]any); ok && md["serverAddress"] != nil {
					md["serverAddress"] = s.PrometheusURL
				}
			}
			return o, unstructured.SetNestedSlice(o.Object, triggers, "spec", "triggers")
		}},
	{Name: "ScaledObject's office-hours cron trigger dropped", Kind: "ScaledObject", Paths: []string{"spec.triggers"},
		Why: "the warm window follows the wall clock, which the twin does not scale: its scenarios would depend on the hour they run at",
		apply: func(_ Env, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
			triggers, _, _ := unstructured.NestedSlice(o.Object, "spec", "triggers")
			kept := triggers[:0]
			for _, t := range triggers {
				if tm, ok := t.(map[string]any); !ok || tm["type"] != "cron" {
					kept = append(kept, t)
				}
			}
			return o, unstructured.SetNestedSlice(o.Object, kept, "spec", "triggers")
		}},
	{Name: "Deployment's periods on the twin's clock", Kind: "Deployment",
		Paths: []string{"spec.progressDeadlineSeconds", "spec.minReadySeconds", "spec.template.spec.terminationGracePeriodSeconds"},
		Why:   "one time scale for the whole twin (progressDeadlineSeconds: the API server's default 600 s when unset)",
		apply: func(s Env, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
			if _, ok, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "progressDeadlineSeconds"); !ok {
				if err := unstructured.SetNestedField(o.Object, int64(defaultProgressDeadline.Seconds()), "spec", "progressDeadlineSeconds"); err != nil {
					return nil, err
				}
			}
			return o, scaleSeconds(s, o.Object, []string{"spec", "progressDeadlineSeconds"}, []string{"spec", "minReadySeconds"},
				[]string{"spec", "template", "spec", "terminationGracePeriodSeconds"})
		}},
	{Name: "a model Service's expected load on the twin's clock", Kind: "Service",
		Paths: []string{"metadata.annotations." + clusterwatch.ModelSpecAnnotation},
		Why:   "the load the orchestrators advise callers of a model at zero to wait is the twin's",
		apply: func(s Env, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
			ann := o.GetAnnotations()
			spec, ok := ann[clusterwatch.ModelSpecAnnotation]
			if !ok {
				return o, nil
			}
			scaled, err := scaleSpecLoad(s, spec)
			if err != nil {
				return nil, err
			}
			ann[clusterwatch.ModelSpecAnnotation] = scaled
			o.SetAnnotations(ann)
			return o, nil
		}},
	{Name: "the platform's Deployments run as processes", Kind: "Deployment", Names: PlatformDeployments, Paths: []string{"-"},
		Why: "a pod on a KWOK node runs nothing: the twin runs each replica as a process of the llmplat binary (StartPlatform) with its pod's arguments and environment, " +
			"where a listen address \":port\" gets the pod's own address (all processes share one network namespace), a Service's DNS name its stand-in's address " +
			"(the twin has no kube-proxy or cluster DNS), the Secret llmplat the test's PostgreSQL and Redis (-redis-prefix: the test's keys) without the AWS " +
			"password secret, the in-cluster credentials the twin's kubeconfig, no drain behind a load balancer (-drain-delay=0s: the twin has none), and the gateway's hold of a caller of a model at zero (-wake-hold) and its queue limit (-queue-limit) on the twin's clock (the queue limit at least 2 s: the twin's own hops on a busy machine do not shrink with the scale)"},
	{Name: "the Prometheus Operator's objects not applied", Kind: "ServiceMonitor", Paths: []string{"-"},
		Why: "the twin's Prometheus is configured with the same targets directly (the operator's CRDs and controller are not part of the twin)"},
	{Name: "the Prometheus Operator's objects not applied", Kind: "PodMonitor", Paths: []string{"-"},
		Why: "as ServiceMonitor"},
	{Name: "the Prometheus Operator's objects not applied", Kind: "PrometheusRule", Paths: []string{"-"},
		Why: "as ServiceMonitor; the alerts are checked by render's own tests"},
}

// PlatformDeployments are the platform's own Deployments.
var PlatformDeployments = []string{"llmplat-gateway", "llmplat-orchestrator"}

// Substitute returns the objects the twin applies for the rendered ones.
func Substitute(s Env, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, orig := range objs {
		o := orig.DeepCopy()
		skip := false
		for _, sub := range Substitutions {
			if sub.Kind != o.GetKind() || (sub.Names != nil && !slices.Contains(sub.Names, o.GetName())) {
				continue
			}
			if sub.apply == nil {
				skip = true
				break
			}
			next, err := sub.apply(s, o)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %s: %w", orig.GetKind(), orig.GetName(), sub.Name, err)
			}
			o = next
		}
		if !skip {
			out = append(out, o)
		}
	}
	return out, nil
}

// scaleDurations scales Karpenter's duration strings ("10m", "Never").
func scaleDurations(s Env, o *unstructured.Unstructured, paths [][]string) error {
	for _, p := range paths {
		v, ok, err := unstructured.NestedString(o.Object, p...)
		if err != nil || !ok || v == "Never" {
			if err != nil {
				return err
			}
			continue
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("%s: %w", strings.Join(p, "."), err)
		}
		if err := unstructured.SetNestedField(o.Object, s.Dur(d).Round(time.Second).String(), p...); err != nil {
			return err
		}
	}
	return nil
}

// scaleSeconds scales integer seconds, to at least 1 where they were.
func scaleSeconds(s Env, obj map[string]any, paths ...[]string) error {
	for _, p := range paths {
		v, ok, err := unstructured.NestedFieldNoCopy(obj, p...)
		if err != nil || !ok {
			if err != nil {
				return err
			}
			continue
		}
		n, ok := integer(v)
		if !ok {
			return fmt.Errorf("%s: %v is not an integer", strings.Join(p, "."), v)
		}
		scaled := int64(0)
		if n > 0 {
			scaled = max(1, int64(math.Round(s.Dur(time.Duration(n)*time.Second).Seconds())))
		}
		if err := unstructured.SetNestedField(obj, scaled, p...); err != nil {
			return err
		}
	}
	return nil
}

// loadKey matches the expected load in a model spec annotation.
var loadKey = regexp.MustCompile(`(^|,)` + clusterwatch.ExpectedLoadKey + `=(\d+)`)

// scaleSpecLoad scales expected-load=SECONDS in a model spec annotation.
func scaleSpecLoad(s Env, spec string) (string, error) {
	m := loadKey.FindStringSubmatch(spec)
	if m == nil {
		return spec, nil
	}
	n, err := strconv.ParseInt(m[2], 10, 64)
	if err != nil {
		return "", err
	}
	scaled := max(1, int64(math.Round(s.Dur(time.Duration(n)*time.Second).Seconds())))
	return loadKey.ReplaceAllString(spec, fmt.Sprintf("${1}%s=%d", clusterwatch.ExpectedLoadKey, scaled)), nil
}

// forecastRange and forecastHorizon match a demand forecast's periods
// (render's DemandQuery): its subquery's window and step in seconds, and
// the seconds its slope is carried over.
var (
	forecastRange   = regexp.MustCompile(`\[(\d+)s:(\d+)s\]`)
	forecastHorizon = regexp.MustCompile(`, 0\) \* (\d+)`)
)

// scaleForecast scales a demand forecast's periods: the subquery's in
// milliseconds, the horizon in (fractional) seconds, as the slope is per
// second of the twin's clock.
func scaleForecast(s Env, q string) (string, error) {
	if len(forecastRange.FindAllString(q, -1)) != 1 || len(forecastHorizon.FindAllString(q, -1)) != 1 {
		return "", fmt.Errorf("a forecast with one subquery range and one horizon expected: %s", q)
	}
	ms := func(secs string) string {
		n, _ := strconv.ParseInt(secs, 10, 64)
		return fmt.Sprintf("%dms", max(1, s.Dur(time.Duration(n)*time.Second).Milliseconds()))
	}
	q = forecastRange.ReplaceAllStringFunc(q, func(m string) string {
		p := forecastRange.FindStringSubmatch(m)
		return "[" + ms(p[1]) + ":" + ms(p[2]) + "]"
	})
	return forecastHorizon.ReplaceAllStringFunc(q, func(m string) string {
		n, _ := strconv.ParseInt(forecastHorizon.FindStringSubmatch(m)[1], 10, 64)
		return ", 0) * " + strconv.FormatFloat(s.Dur(time.Duration(n)*time.Second).Seconds(), 'f', -1, 64)
	}), nil
}

// integer is v as an integer, as a YAML or JSON decoder may give it.
func integer(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case float64:
		return int64(n), n == math.Trunc(n)
	}
	return 0, false
}
