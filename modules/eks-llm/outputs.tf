output "cluster_name" {
  description = "The EKS cluster's name."
  value       = aws_eks_cluster.this.name
}

output "cluster_endpoint" {
  description = "The Kubernetes API's URL."
  value       = aws_eks_cluster.this.endpoint
}

output "kubernetes_version" {
  description = "The control plane's Kubernetes minor."
  value       = aws_eks_cluster.this.version
}

output "cluster_ca_data" {
  description = "The cluster's CA certificate, base64 (as a kubeconfig holds it)."
  value       = aws_eks_cluster.this.certificate_authority[0].data
}

output "kubeconfig" {
  description = "A kubeconfig for the cluster that takes its token from `aws eks get-token` (no credential in it)."
  value = yamlencode({
    apiVersion      = "v1"
    kind            = "Config"
    current-context = var.name
    clusters = [{
      name    = var.name
      cluster = { server = aws_eks_cluster.this.endpoint, certificate-authority-data = aws_eks_cluster.this.certificate_authority[0].data }
    }]
    contexts = [{ name = var.name, context = { cluster = var.name, user = var.name } }]
    users = [{
      name = var.name
      user = { exec = {
        apiVersion = "client.authentication.k8s.io/v1beta1"
        command    = "aws"
        args       = ["eks", "get-token", "--cluster-name", var.name, "--region", local.region]
      } }
    }]
  })
}

output "region" {
  description = "The region everything is in."
  value       = local.region
}

output "vpc_id" {
  description = "The VPC."
  value       = local.vpc_id
}

output "private_subnet_ids" {
  description = "The private subnets (nodes, data stores)."
  value       = local.private_subnet_ids
}

output "karpenter" {
  description = "What Karpenter's Helm release and EC2NodeClass need: the controller's role, the GPU nodes' role (Karpenter makes their instance profile), the interruption queue, and the version (karpenter_version, checked against kubernetes_version)."
  value = {
    controller_role_arn = aws_iam_role.karpenter.arn
    node_role_name      = aws_iam_role.karpenter_node.name
    node_role_arn       = aws_iam_role.karpenter_node.arn
    interruption_queue  = aws_sqs_queue.karpenter_interruption.name
    version             = var.karpenter_version
  }
}

output "database" {
  description = "Aurora PostgreSQL: its writer endpoint, port, database, user, and the Secrets Manager secret holding the password (rotated by RDS), which the gateway and the orchestrator read themselves (role platform_role_arn)."
  value = {
    endpoint   = aws_rds_cluster.this.endpoint
    port       = aws_rds_cluster.this.port
    name       = aws_rds_cluster.this.database_name
    username   = aws_rds_cluster.this.master_username
    secret_arn = local.database_secret_arn
  }
}

output "platform_role_arn" {
  description = "The role of the gateway's and the orchestrator's pods (EKS Pod Identity): it reads the database password's secret alone."
  value       = aws_iam_role.platform.arn
}

output "redis" {
  description = "ElastiCache Redis: the primary endpoint (TLS, rediss://), and the secret holding the AUTH token."
  value = {
    endpoint   = aws_elasticache_replication_group.this.primary_endpoint_address
    port       = aws_elasticache_replication_group.this.port
    secret_arn = aws_secretsmanager_secret.redis.arn
  }
}

output "model_bucket" {
  description = "The model bucket (s3://<bucket>/<model>/<revision>/)."
  value       = aws_s3_bucket.models.bucket
}

output "modelsync_role_arn" {
  description = "The read-only role of the model pods' modelsync init container."
  value       = aws_iam_role.modelsync.arn
}

output "gateway" {
  description = "The edge: the gateway's URL, the node agents' URL (the orchestrators' node socket), the load balancer's DNS name, the target groups the TargetGroupBindings fill, the certificate and (without route53_zone_id) the DNS records that validate it (also the output certificate_validations)."
  value = {
    url                     = "https://${var.gateway_domain}"
    lb_dns_name             = aws_lb.gateway.dns_name
    target_group_arn        = aws_lb_target_group.gateway.arn
    nodes_url               = "wss://${var.gateway_domain}:${local.node_listener_port}/v1/nodes/connect"
    nodes_target_group_arn  = aws_lb_target_group.nodes.arn
    certificate_arn         = aws_acm_certificate.gateway.arn
    lb_controller_role_arn  = aws_iam_role.lb_controller.arn
    certificate_validations = [for o in aws_acm_certificate.gateway.domain_validation_options : { name = o.resource_record_name, type = o.resource_record_type, value = o.resource_record_value }]
  }
}

output "platform_description" {
  description = "The cluster's part of the platform description `llmplat render` and the provider's llmplat_platform_manifests read: cluster, GPU nodes' role, namespace, model cache, GPU pools and the load balancer's subnets the gateway reads PROXY headers from. The in-cluster layer adds images, replicas, models and their workloads."
  value = {
    cluster   = var.name
    node_role = aws_iam_role.karpenter_node.name
    namespace = var.namespace
    model_cache = {
      bucket = aws_s3_bucket.models.bucket
      region = local.region
    }
    gpu_pool = var.gpu_pool
    # The load balancer's subnets: the gateway reads the client's address
    # from the PROXY protocol header of connections from there alone.
    gateway = { proxy_protocol_from = local.gateway_lb_cidrs }
  }
}

output "certificate_validations" {
  description = "The DNS records that validate the gateway's certificate, for a DNS provider other than Route 53. It depends on the certificate alone, so a first `terraform apply -target=<module>.aws_acm_certificate.gateway` shows it before the apply that waits for issuance."
  value       = [for o in aws_acm_certificate.gateway.domain_validation_options : { name = o.resource_record_name, type = o.resource_record_type, value = o.resource_record_value }]
}

output "api_access" {
  description = "How the Kubernetes API is reached: the public endpoint's CIDRs (empty when private only), and the private endpoint's security group with the CIDRs and groups it admits on 443."
  value = {
    public_cidrs            = var.public_api_endpoint_cidrs
    private_security_group  = aws_security_group.api.id
    private_cidrs           = var.private_api_endpoint_cidrs
    private_security_groups = var.private_api_endpoint_security_group_ids
    admins                  = sort(local.cluster_admin_arns)
  }
}

output "alerts_topic_arn" {
  description = "The SNS topic Alertmanager publishes every alert to (cluster-addons' receiver)."
  value       = aws_sns_topic.alerts.arn
}

output "storage_kms_key_arn" {
  description = "The key the gp3 StorageClass encrypts the monitoring stack's volumes with."
  value       = aws_kms_key.data.arn
}

output "engine_repository_url" {
  description = "The ECR repository of the vLLM image (<account>.dkr.ecr.<region>.amazonaws.com/<name>/vllm-openai): copy the image here and deploy it by digest (docs/deploy-eks.md). Tags are immutable and every push is scanned."
  value       = aws_ecr_repository.engine.repository_url
}
