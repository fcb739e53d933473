package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/llmplat/llmplat/runtime/clusterwatch"
)

// inClusterNamespace is where a pod finds its own namespace.
const inClusterNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// kubeClient returns a client for the cluster the orchestrator runs in or
// is pointed at with kubeconfig, and the namespace to watch; nil when it
// has neither (a cluster without the API, or no cluster at all).
func kubeClient(kubeconfig, namespace string, logger *slog.Logger) (kubernetes.Interface, string, error) {
	var (
		cfg *rest.Config
		err error
	)
	switch {
	case kubeconfig != "":
		rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig}
		cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
		if cfg, err = cc.ClientConfig(); err != nil {
			return nil, "", fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
		}
		if namespace == "" {
			if namespace, _, err = cc.Namespace(); err != nil {
				return nil, "", fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
			}
		}
	default:
		cfg, err = rest.InClusterConfig()
		if errors.Is(err, rest.ErrNotInCluster) {
			return nil, "", nil
		}
		if err != nil {
			return nil, "", fmt.Errorf("in-cluster Kubernetes config: %w", err)
		}
		if namespace == "" {
			b, err := os.ReadFile(inClusterNamespace)
			if err != nil {
				return nil, "", fmt.Errorf("in-cluster namespace: %w", err)
			}
			namespace = strings.TrimSpace(string(b))
		}
	}
	// client-go logs through klog; send it to the process's logger.
	klog.SetSlogLogger(logger.With("component", "client-go"))
	cfg.UserAgent = "llmplat-orchestrator"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("kubernetes client: %w", err)
	}
	return client, namespace, nil
}

// newClusterWatch returns the controller for the replica id, or nil when
// there is no cluster API to watch.
func newClusterWatch(kubeconfig, namespace, id string, drainer clusterwatch.Drainer, logger *slog.Logger) (*clusterwatch.Controller, error) {
	client, ns, err := kubeClient(kubeconfig, namespace, logger)
	if err != nil || client == nil {
		return nil, err
	}
	return clusterwatch.New(clusterwatch.Config{Client: client, Namespace: ns, Identity: id, Drainer: drainer,
		Logger: logger.With("component", "clusterwatch")})
}
