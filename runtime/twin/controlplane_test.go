package twin

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// TestControlPlane: the twin's control plane runs its controllers: a
// Deployment gets its ReplicaSet and pods, and the scheduler finds no
// node for them (Unschedulable, the condition Karpenter acts on).
func TestControlPlane(t *testing.T) {
	c := StartControlPlane(t, Options{Scale: 10})
	if c == nil {
		return
	}
	ctx := t.Context()
	labels := map[string]string{"app": "probe"}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "none"}}}}}}
	if _, err := c.Client.AppsV1().Deployments("default").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyNil(t, time.Minute, "two pods of the Deployment found unschedulable", func() error {
		pods, err := c.Client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: "app=probe"})
		if err != nil {
			return err
		}
		unschedulable := 0
		for _, p := range pods.Items {
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
					unschedulable++
				}
			}
		}
		if unschedulable != 2 {
			return fmt.Errorf("%d of %d pods unschedulable", unschedulable, len(pods.Items))
		}
		return nil
	})
}
