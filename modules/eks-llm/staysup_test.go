package eksllm_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// helmValues is the object a helm_release's values = [yamlencode({...})]
// encodes, as syntax.
func helmValues(t *testing.T, m module, release string) *hclsyntax.ObjectConsExpr {
	t.Helper()
	tuple, ok := attr(t, m.block(t, "resource", "helm_release", release), "values").(*hclsyntax.TupleConsExpr)
	if !ok || len(tuple.Exprs) != 1 {
		t.Fatalf("helm_release.%s: values is not [yamlencode({...})]", release)
	}
	call, ok := tuple.Exprs[0].(*hclsyntax.FunctionCallExpr)
	if !ok || call.Name != "yamlencode" {
		t.Fatalf("helm_release.%s: values is not [yamlencode({...})]", release)
	}
	return call.Args[0].(*hclsyntax.ObjectConsExpr)
}

// at follows keys down nested object constructors; nil when one is missing.
func at(e hclsyntax.Expression, keys ...string) hclsyntax.Expression {
	for _, k := range keys {
		obj, ok := e.(*hclsyntax.ObjectConsExpr)
		if !ok {
			return nil
		}
		var next hclsyntax.Expression
		for _, item := range obj.Items {
			if hcl.ExprAsKeyword(item.KeyExpr) == k {
				next = item.ValueExpr
			}
		}
		if next == nil {
			return nil
		}
		e = next
	}
	return e
}

// value is a literal at keys as a string ("" when absent or not literal).
func value(e hclsyntax.Expression, keys ...string) string {
	x := at(e, keys...)
	if x == nil {
		return ""
	}
	v, diags := x.Value(nil)
	if diags.HasErrors() || v.IsNull() {
		return ""
	}
	switch {
	case v.Type().FriendlyName() == "string":
		return v.AsString()
	case v.Type().FriendlyName() == "number":
		return v.AsBigFloat().Text('f', -1)
	case v.Type().FriendlyName() == "bool":
		if v.True() {
			return "true"
		}
		return "false"
	}
	return ""
}

// TestMonitoringStaysUp: the in-cluster layer keeps the autoscaler's
// Prometheus up and its alerts delivered (issue 43): two Prometheus and two
// Alertmanager replicas, each on a gp3 volume of the EBS CSI driver
// (encrypted with the module's key), Alertmanager routing to the AWS
// layer's SNS topic, the control-plane monitors EKS cannot serve off, and
// KEDA's and Karpenter's metrics scraped for their alerts.
func TestMonitoringStaysUp(t *testing.T) {
	addons := load(t, "cluster-addons")
	kps := helmValues(t, addons, "kube_prometheus_stack")
	for _, c := range []struct {
		path []string
		want string
	}{
		{[]string{"prometheus", "prometheusSpec", "replicas"}, "2"},
		{[]string{"alertmanager", "alertmanagerSpec", "replicas"}, "2"},
		{[]string{"kubeControllerManager", "enabled"}, "false"},
		{[]string{"kubeScheduler", "enabled"}, "false"},
		{[]string{"kubeEtcd", "enabled"}, "false"},
		{[]string{"kubeProxy", "enabled"}, "false"},
		{[]string{"alertmanager", "config", "route", "receiver"}, "sns"},
	} {
		if got := value(kps, c.path...); got != c.want {
			t.Errorf("kube-prometheus-stack %s = %q, want %s", strings.Join(c.path, "."), got, c.want)
		}
	}
	for _, path := range [][]string{{"prometheus", "prometheusSpec", "storageSpec"}, {"alertmanager", "alertmanagerSpec", "storage"}} {
		if e := at(kps, path...); e == nil || !slices.Equal(refs(e), []string{"local.monitoring_volume"}) {
			t.Errorf("kube-prometheus-stack %s is not the gp3 volume claim (an emptyDir loses every series with its pod)", strings.Join(path, "."))
		}
	}
	if class := at(addons.locals()["monitoring_volume"], "volumeClaimTemplate", "spec", "storageClassName"); class == nil ||
		!slices.Equal(refs(class), []string{"kubernetes_storage_class_v1.gp3.metadata"}) {
		t.Error("the monitoring volume's storage class is not the gp3 StorageClass")
	}
	receivers, _ := at(kps, "alertmanager", "config", "receivers").(*hclsyntax.TupleConsExpr)
	sns := false
	if receivers != nil {
		for _, r := range receivers.Exprs {
			if value(r, "name") == "sns" && slices.Contains(refs(r), "var.cluster.alerts_topic_arn") {
				sns = true
			}
		}
	}
	if !sns {
		t.Error("Alertmanager has no receiver publishing to var.cluster.alerts_topic_arn: alerts reach nobody")
	}

	var sc *hclsyntax.Block
	for _, b := range addons.blocks("resource") {
		if slices.Equal(b.Labels, []string{"kubernetes_storage_class_v1", "gp3"}) {
			sc = b
		}
	}
	if sc == nil {
		t.Fatal("no gp3 StorageClass: the monitoring stack's volumes cannot be made")
	}
	if got := literal(t, attr(t, sc, "storage_provisioner")).AsString(); got != "ebs.csi.aws.com" {
		t.Errorf("the gp3 StorageClass's provisioner is %s, want the EBS CSI driver", got)
	}
	params := attr(t, sc, "parameters")
	if value(params, "type") != "gp3" || value(params, "encrypted") != "true" || !slices.Equal(refs(at(params, "kmsKeyId")), []string{"var.cluster.storage_kms_key_arn"}) {
		t.Error("the StorageClass must make encrypted gp3 volumes with the module's key")
	}

	keda := helmValues(t, addons, "keda")
	if value(keda, "prometheus", "operator", "serviceMonitor", "enabled") != "true" {
		t.Error("KEDA's operator metrics are not scraped: the KEDAScalerErrors alert reads nothing")
	}
	karpenter := helmValues(t, addons, "karpenter")
	if value(karpenter, "serviceMonitor", "enabled") != "true" {
		t.Error("Karpenter's metrics are not scraped: the KarpenterLaunchFailing alert reads nothing")
	}
}

// TestKarpenterRepairsGPUNodes: Karpenter's node repair is on (issue 43):
// with the node monitoring agent (an add-on of the AWS layer, checked by
// terraform test), a node whose GPU an XID error took is replaced rather
// than left billing while vLLM restarts on it.
func TestKarpenterRepairsGPUNodes(t *testing.T) {
	karpenter := helmValues(t, load(t, "cluster-addons"), "karpenter")
	if value(karpenter, "settings", "featureGates", "nodeRepair") != "true" {
		t.Error("Karpenter's settings.featureGates.nodeRepair is not true: unhealthy GPU nodes are never replaced")
	}
}
