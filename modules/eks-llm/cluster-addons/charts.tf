# The cluster's add-ons as Helm releases, each pinned, each on the system
# nodes: Karpenter (the GPU nodes), KEDA (the models' replicas), the
# Prometheus stack (KEDA's metrics, the alerts, Grafana), NVIDIA's DCGM
# exporter on the GPU nodes (it tolerates their taint), and the AWS Load
# Balancer Controller (the gateway's TargetGroupBinding).
#
# CRDs: Helm installs a chart's crds/ folder once and never upgrades it, so
# a chart bump would run a new controller against old CRDs. Karpenter's and
# the Prometheus Operator's CRDs therefore come from their CRD charts
# (karpenter-crd, prometheus-operator-crds), whose CRDs are templates Helm
# upgrades, pinned with their main charts, which skip theirs. KEDA's chart
# already renders its CRDs as templates (crds.install), so they upgrade
# with it. The load balancer controller's have no CRD chart: its chart's
# crds/ folder is applied as manifests at the chart's version (below).
# Upgrade order: the CRDs first, then their main chart (the depends_on
# below; docs/deploy-eks.md).
#
# The NVIDIA device plugin is not a chart here: it is the DaemonSet
# `llmplat render` writes (gpu.yaml), applied with the platform's objects,
# so GitOps and Terraform users run the same, schema-checked object, and
# its affinity is the GPU pools' label (the chart's default needs node
# feature discovery's labels).

locals {
  system_nodes = { "llmplat.io/pool" = "system" }
  gpu_toleration = {
    key      = "nvidia.com/gpu"
    operator = "Exists"
    effect   = "NoSchedule"
  }
}

# Karpenter's CRDs (NodePool, NodeClaim, EC2NodeClass), at the
# controller's version: the AWS layer's karpenter_version, which it checks
# against the cluster's Kubernetes minor.
resource "helm_release" "karpenter_crd" {
  name       = "karpenter-crd"
  namespace  = "kube-system"
  repository = "oci://public.ecr.aws/karpenter"
  chart      = "karpenter-crd"
  version    = var.cluster.karpenter.version
  wait       = true
}

resource "helm_release" "karpenter" {
  name       = "karpenter"
  namespace  = "kube-system"
  repository = "oci://public.ecr.aws/karpenter"
  chart      = "karpenter"
  version    = var.cluster.karpenter.version
  wait       = true
  skip_crds  = true # karpenter_crd's

  values = [yamlencode({
    settings = {
      clusterName       = var.cluster.cluster_name
      interruptionQueue = var.cluster.karpenter.interruption_queue
      # Node repair: a node the EKS node monitoring agent (an add-on of the
      # AWS layer) reports unhealthy, a GPU lost to an XID error among
      # them, is replaced after Karpenter's toleration of that condition,
      # rather than keep vLLM restarting on a billed node.
      featureGates = { nodeRepair = true }
    }
    # The role comes by EKS Pod Identity (the AWS layer's association).
    serviceAccount = { name = "karpenter" }
    nodeSelector   = local.system_nodes
    replicas       = 2
    # Its launch failures, for the KarpenterLaunchFailing alert.
    serviceMonitor = { enabled = true }
    controller = {
      resources = {
        requests = { cpu = "1", memory = "1Gi" }
        limits   = { memory = "1Gi" }
      }
    }
  })]

  depends_on = [helm_release.karpenter_crd]
}

resource "helm_release" "keda" {
  name             = "keda"
  namespace        = "keda"
  create_namespace = true
  repository       = "https://kedacore.github.io/charts"
  chart            = "keda"
  version          = var.chart_versions.keda
  wait             = true

  values = [yamlencode({
    nodeSelector = local.system_nodes
    # Its scalers' errors, for the KEDAScalerErrors alert: with Prometheus
    # down a ScaledObject holds its fallback and nothing else shows it.
    prometheus = { operator = { enabled = true, serviceMonitor = { enabled = true } } }
  })]
}

# The Prometheus Operator's CRDs (ServiceMonitor, PodMonitor,
# PrometheusRule, ...), at the operator version kube-prometheus-stack runs.
resource "helm_release" "prometheus_operator_crds" {
  name             = "prometheus-operator-crds"
  namespace        = "monitoring"
  create_namespace = true
  repository       = "https://prometheus-community.github.io/helm-charts"
  chart            = "prometheus-operator-crds"
  version          = var.chart_versions.prometheus_operator_crds
  wait             = true
}

resource "helm_release" "kube_prometheus_stack" {
  name             = "kube-prometheus-stack"
  namespace        = "monitoring"
  create_namespace = true
  repository       = "https://prometheus-community.github.io/helm-charts"
  chart            = "kube-prometheus-stack"
  version          = var.chart_versions.kube_prometheus_stack
  wait             = true
  skip_crds        = true # prometheus_operator_crds'

  values = [yamlencode({
    # Its CRD subchart off too: prometheus_operator_crds owns them.
    crds = { enabled = false }
    # KEDA scales every model on Prometheus: two replicas, each on its own
    # gp3 volume (an emptyDir lost every series with its pod), spread over
    # the system nodes; KEDA reaches either through the Service.
    prometheus = {
      prometheusSpec = {
        # The platform's ServiceMonitor, PodMonitor and rules carry no
        # release label: select every one.
        serviceMonitorSelectorNilUsesHelmValues = false
        podMonitorSelectorNilUsesHelmValues     = false
        ruleSelectorNilUsesHelmValues           = false
        nodeSelector                            = local.system_nodes
        replicas                                = 2
        podAntiAffinity                         = "hard"
        retention                               = "15d"
        retentionSize                           = "45GB"
        storageSpec                             = local.monitoring_volume
      }
    }
    grafana = {
      nodeSelector = local.system_nodes
      # The dashboard is a ConfigMap labelled grafana_dashboard.
      sidecar = { dashboards = { enabled = true, searchNamespace = "ALL" } }
    }
    alertmanager = {
      alertmanagerSpec = {
        nodeSelector    = local.system_nodes
        replicas        = 2
        podAntiAffinity = "hard"
        storage         = local.monitoring_volume
      }
      # Every alert to the AWS layer's SNS topic (its role by Pod
      # Identity); the stack's Watchdog, which always fires, to nowhere.
      config = {
        route = {
          receiver        = "sns"
          group_by        = ["alertname", "model"]
          group_wait      = "30s"
          group_interval  = "5m"
          repeat_interval = "4h"
          routes          = [{ receiver = "null", matchers = ["alertname = Watchdog"] }]
        }
        receivers = [
          { name = "null" },
          {
            name = "sns"
            sns_configs = [{
              topic_arn     = var.cluster.alerts_topic_arn
              sigv4         = { region = var.cluster.region }
              send_resolved = true
            }]
          },
        ]
      }
    }
    # EKS runs the control plane: its scheduler, controller manager and
    # etcd cannot be scraped, and kube-proxy serves its metrics on the
    # node's loopback. Their monitors could never be up and their alerts
    # would always fire.
    kubeControllerManager = { enabled = false }
    kubeScheduler         = { enabled = false }
    kubeEtcd              = { enabled = false }
    kubeProxy             = { enabled = false }
  })]

  depends_on = [helm_release.prometheus_operator_crds, kubernetes_storage_class_v1.gp3]
}

locals {
  # A ReadWriteOnce gp3 volume per Prometheus and Alertmanager replica.
  monitoring_volume = {
    volumeClaimTemplate = {
      spec = {
        storageClassName = kubernetes_storage_class_v1.gp3.metadata[0].name
        accessModes      = ["ReadWriteOnce"]
        resources        = { requests = { storage = "50Gi" } }
      }
    }
  }
}

# gp3 volumes of the EBS CSI driver (an add-on of the AWS layer), encrypted
# with the module's key, bound where the pod is scheduled (a volume is
# zonal), and growable in place.
resource "kubernetes_storage_class_v1" "gp3" {
  metadata {
    name = "gp3"
  }
  storage_provisioner    = "ebs.csi.aws.com"
  reclaim_policy         = "Retain"
  volume_binding_mode    = "WaitForFirstConsumer"
  allow_volume_expansion = true
  parameters = {
    type      = "gp3"
    encrypted = "true"
    kmsKeyId  = var.cluster.storage_kms_key_arn
  }
}

resource "helm_release" "dcgm_exporter" {
  name       = "dcgm-exporter"
  namespace  = "monitoring"
  repository = "https://nvidia.github.io/dcgm-exporter/helm-charts"
  chart      = "dcgm-exporter"
  version    = var.chart_versions.dcgm_exporter
  wait       = false # no GPU node may exist yet: the DaemonSet has no pod

  values = [yamlencode({
    # On the GPU nodes only, whose taint it tolerates.
    tolerations = [local.gpu_toleration]
    affinity = {
      nodeAffinity = {
        requiredDuringSchedulingIgnoredDuringExecution = {
          nodeSelectorTerms = [{
            matchExpressions = [{ key = "karpenter.k8s.aws/instance-gpu-count", operator = "Exists" }]
          }]
        }
      }
    }
    serviceMonitor = { enabled = true }
  })]

  depends_on = [helm_release.kube_prometheus_stack]
}

# The AWS Load Balancer Controller's CRDs (TargetGroupBinding,
# IngressClassParams) ship in its chart's crds/ folder only: no CRD chart,
# and the chart's README applies the folder before each upgrade. So that
# folder, copied unchanged at the pinned chart version
# (crds/aws-load-balancer-controller-<version>.yaml), is applied here by
# server-side apply before the chart, which skips it. Bumping the chart
# without copying its CRDs fails the plan: the file is missing.
locals {
  lb_controller_crd_docs = split("\n---\n", file("${path.module}/crds/aws-load-balancer-controller-${var.chart_versions.aws_load_balancer_controller}.yaml"))
  lb_controller_crds     = { for d in local.lb_controller_crd_docs : yamldecode(d).metadata.name => yamldecode(d) }
}

resource "kubernetes_manifest" "lb_controller_crd" {
  for_each = local.lb_controller_crds

  manifest = each.value

  # A cluster installed before these were Terraform's has them from Helm's
  # first install: take their fields over (import them first,
  # docs/deploy-eks.md's Upgrades).
  field_manager {
    force_conflicts = true
  }
}

resource "helm_release" "aws_load_balancer_controller" {
  name       = "aws-load-balancer-controller"
  namespace  = "kube-system"
  repository = "https://aws.github.io/eks-charts"
  chart      = "aws-load-balancer-controller"
  version    = var.chart_versions.aws_load_balancer_controller
  wait       = true
  skip_crds  = true # lb_controller_crd's

  values = [yamlencode({
    clusterName    = var.cluster.cluster_name
    region         = var.cluster.region
    vpcId          = var.cluster.vpc_id
    serviceAccount = { name = "aws-load-balancer-controller" }
    nodeSelector   = local.system_nodes
    # Only TargetGroupBindings: the load balancer is the AWS layer's.
    enableServiceMutatorWebhook = false
  })]

  depends_on = [kubernetes_manifest.lb_controller_crd]
}
