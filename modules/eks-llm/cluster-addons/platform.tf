# The platform's own objects: the Secret its processes read, everything
# `llmplat render` writes for the platform (namespace, gateway and
# orchestrator, their rights, the EC2NodeClass and GPU NodePools, the
# device plugin, monitors, alerts, dashboard) from the description the AWS
# layer started, the gateway's TargetGroupBinding, and the models through
# the llmplat provider (their engines, applied by llmplat_model).

locals {
  namespace = var.cluster.platform_description.namespace

  # The AWS layer's part of the description, with what only this layer
  # knows: images, replicas, Prometheus, and the models' workloads.
  description = merge(var.cluster.platform_description, {
    images         = var.images
    prometheus_url = "http://kube-prometheus-stack-prometheus.monitoring.svc:9090"
    gateway        = merge(try(var.cluster.platform_description.gateway, {}), { replicas = var.replicas.gateway })
    orchestrator   = { replicas = var.replicas.orchestrator }
    plan = {
      workloads = [for name, m in var.models : {
        model                       = name
        gpu                         = var.gpu
        tensor_parallel_size        = m.gpus_per_replica
        peak_streams                = m.peak_streams
        planned_streams_per_replica = m.planned_streams_per_replica
        min_replicas                = m.min_replicas
        max_replicas                = m.max_replicas
      }]
    }
    models = [for name, m in var.models : merge(
      { name = name, revision = m.revision, spot = m.spot },
      m.warm == null ? {} : { warm = m.warm },
    )]
  })
}

data "llmplat_platform_manifests" "platform" {
  description = yamlencode(local.description)
}

locals {
  # The namespace first (the Secret lives in it), then the rest.
  namespace_key = "platform.yaml/Namespace//${local.namespace}"
  manifests     = { for k, v in data.llmplat_platform_manifests.platform.manifests : k => jsondecode(v) if k != local.namespace_key }
}

resource "kubernetes_manifest" "namespace" {
  manifest = jsondecode(data.llmplat_platform_manifests.platform.manifests[local.namespace_key])
}

# The database URL carries no password: RDS rotates it every 7 days, and a
# copy here would break new connections after the first rotation. The
# gateway and the orchestrator read it from the secret named by
# LLMPLAT_DATABASE_PASSWORD_SECRET (their Pod Identity role may read that
# secret alone) when they connect, and again when PostgreSQL refuses it.
# The Redis AUTH token is drawn once and not rotated.
data "aws_secretsmanager_secret_version" "redis" {
  secret_id = var.cluster.redis.secret_arn
}

locals {
  database_url = format("postgres://%s@%s:%d/%s?sslmode=require", urlencode(var.cluster.database.username),
  var.cluster.database.endpoint, var.cluster.database.port, var.cluster.database.name)
  redis_url = format("rediss://:%s@%s:%d/0", urlencode(data.aws_secretsmanager_secret_version.redis.secret_string),
  var.cluster.redis.endpoint, var.cluster.redis.port)
}

resource "kubernetes_secret_v1" "llmplat" {
  metadata {
    name      = "llmplat"
    namespace = local.namespace
  }
  data = {
    LLMPLAT_DATABASE_URL             = local.database_url
    LLMPLAT_DATABASE_PASSWORD_SECRET = var.cluster.database.secret_arn
    LLMPLAT_REDIS_URL                = local.redis_url
    LLMPLAT_ADMIN_TOKEN              = var.admin_token
    LLMPLAT_INTERNAL_TOKEN           = var.internal_token
  }

  depends_on = [kubernetes_manifest.namespace]
}

resource "kubernetes_manifest" "platform" {
  for_each = local.manifests

  manifest = each.value

  # The CRDs come with the charts; the processes need their Secret.
  depends_on = [
    kubernetes_manifest.namespace, kubernetes_secret_v1.llmplat,
    helm_release.karpenter, helm_release.keda, helm_release.kube_prometheus_stack,
  ]
}

# The gateway pods' and the orchestrators' IPs in the AWS layer's target
# groups, kept current by the AWS Load Balancer Controller.
locals {
  target_group_bindings = {
    "llmplat-gateway"      = { service = "llmplat-gateway", port = 80, arn = var.cluster.gateway.target_group_arn }
    "llmplat-orchestrator" = { service = "llmplat-orchestrator", port = 8090, arn = var.cluster.gateway.nodes_target_group_arn }
  }
}

resource "kubernetes_manifest" "target_group_binding" {
  for_each = local.target_group_bindings

  manifest = {
    apiVersion = "elbv2.k8s.aws/v1beta1"
    kind       = "TargetGroupBinding"
    metadata   = { name = each.key, namespace = local.namespace }
    spec = {
      serviceRef     = { name = each.value.service, port = each.value.port }
      targetGroupARN = each.value.arn
      targetType     = "ip"
    }
  }

  depends_on = [helm_release.aws_load_balancer_controller, kubernetes_manifest.platform]
}

# The models: registered with the platform and their engines applied by
# the llmplat provider (server-side apply, drift found on refresh).
resource "llmplat_model" "this" {
  for_each = var.models

  name                            = each.key
  served_name                     = each.value.served_name
  prompt_price_micro_per_mtok     = each.value.prompt_price_micro_per_mtok
  completion_price_micro_per_mtok = each.value.completion_price_micro_per_mtok
  max_context_tokens              = each.value.max_context_tokens
  max_output_tokens               = each.value.max_output_tokens

  deployment = {
    namespace                   = local.namespace
    revision                    = each.value.revision
    s3_bucket                   = var.cluster.platform_description.model_cache.bucket
    s3_region                   = var.cluster.platform_description.model_cache.region
    engine_image                = var.images.engine
    platform_image              = var.images.platform
    prometheus_url              = local.description.prometheus_url
    gpu                         = var.gpu
    gpus_per_replica            = each.value.gpus_per_replica
    node_pool                   = "gpu-${var.cluster.platform_description.gpu_pool.gpu}"
    planned_streams_per_replica = each.value.planned_streams_per_replica
    min_replicas                = each.value.min_replicas
    max_replicas                = each.value.max_replicas
    spot                        = each.value.spot
    warm                        = each.value.warm
  }

  depends_on = [kubernetes_manifest.platform, helm_release.keda]
}
