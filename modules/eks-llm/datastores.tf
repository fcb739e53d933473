# Aurora PostgreSQL Serverless v2 (the ledger) and ElastiCache Redis (limits,
# queues, node records): private subnets only, reachable from the cluster's
# security group alone, encrypted at rest with the module's key and in
# transit, multi-AZ.

locals {
  cluster_security_group_id = aws_eks_cluster.this.vpc_config[0].cluster_security_group_id
}

resource "aws_security_group" "database" {
  name        = "${var.name}-database"
  description = "Aurora PostgreSQL: the cluster's nodes only"
  vpc_id      = local.vpc_id
  tags        = merge(local.tags, { Name = "${var.name}-database" })
}

resource "aws_vpc_security_group_ingress_rule" "database_from_cluster" {
  security_group_id            = aws_security_group.database.id
  description                  = "PostgreSQL from the cluster's nodes and pods"
  ip_protocol                  = "tcp"
  from_port                    = 5432
  to_port                      = 5432
  referenced_security_group_id = local.cluster_security_group_id
}

resource "aws_db_subnet_group" "this" {
  name       = "${var.name}-database"
  subnet_ids = local.private_subnet_ids
  tags       = local.tags
}

resource "aws_rds_cluster" "this" {
  cluster_identifier = "${var.name}-ledger"
  engine             = "aurora-postgresql"
  engine_mode        = "provisioned"
  # The major only: RDS applies minor versions in the maintenance window
  # (the instances' auto_minor_version_upgrade), and the provider keeps a
  # major that prefixes the running version (15 for 15.12) without a diff.
  # A major upgrade is a change of this value (docs/deploy-eks.md, Upgrades).
  engine_version              = var.database.engine_version
  allow_major_version_upgrade = true
  database_name               = "llmplat"
  master_username             = "llmplat"
  # The password lives in Secrets Manager, rotated by RDS every 7 days,
  # never in state nor in a Kubernetes Secret: the gateway and the
  # orchestrator are given the secret's ARN and read the password from it
  # on connect, again after PostgreSQL refuses the one they kept (28P01),
  # with the platform role below.
  manage_master_user_password   = true
  master_user_secret_kms_key_id = aws_kms_key.data.arn

  storage_encrypted = true
  kms_key_id        = aws_kms_key.data.arn

  db_subnet_group_name   = aws_db_subnet_group.this.name
  vpc_security_group_ids = [aws_security_group.database.id]

  serverlessv2_scaling_configuration {
    min_capacity = var.database.min_acu
    max_capacity = var.database.max_acu
  }

  backup_retention_period             = var.database.backup_days
  copy_tags_to_snapshot               = true
  deletion_protection                 = var.database.deletion_protection
  skip_final_snapshot                 = !var.database.deletion_protection
  final_snapshot_identifier           = "${var.name}-ledger-final"
  enabled_cloudwatch_logs_exports     = ["postgresql"]
  iam_database_authentication_enabled = false

  tags = local.tags
}

resource "aws_rds_cluster_instance" "this" {
  count = var.database.instances

  identifier          = "${var.name}-ledger-${count.index}"
  cluster_identifier  = aws_rds_cluster.this.id
  engine              = aws_rds_cluster.this.engine
  engine_version      = aws_rds_cluster.this.engine_version
  instance_class      = "db.serverless"
  publicly_accessible = false
  # Minor versions come from RDS (the cluster tracks the major).
  auto_minor_version_upgrade = true
  db_subnet_group_name       = aws_db_subnet_group.this.name
  # Readers in other zones than the writer: a zone's loss fails over.
  availability_zone = count.index < length(local.azs) && local.create_vpc ? local.azs[count.index] : null

  performance_insights_enabled    = true
  performance_insights_kms_key_id = aws_kms_key.data.arn

  tags = local.tags
}

# The role of the platform's pods (EKS Pod Identity on the gateway's and
# the orchestrator's service accounts): read the database password's
# secret, that one alone, and decrypt it with the module's key only
# through Secrets Manager. IAM database authentication was the other way;
# its 15-minute tokens and 200 new connections per second per instance
# limit fit a pool that reconnects in bursts worse than a password read
# once per rotation.
locals {
  platform_service_accounts = toset(["llmplat-gateway", "llmplat-orchestrator"])
  database_secret_arn       = aws_rds_cluster.this.master_user_secret[0].secret_arn
}

resource "aws_iam_role" "platform" {
  name               = "${var.name}-platform"
  assume_role_policy = local.pod_identity_trust
  tags               = local.tags
}

resource "aws_iam_role_policy" "platform_database_secret" {
  name = "read-database-password"
  role = aws_iam_role.platform.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [
      {
        Sid      = "ReadDatabasePassword"
        Effect   = "Allow"
        Action   = ["secretsmanager:GetSecretValue"]
        Resource = local.database_secret_arn
      },
      {
        Sid       = "DecryptDatabasePassword"
        Effect    = "Allow"
        Action    = ["kms:Decrypt"]
        Resource  = aws_kms_key.data.arn
        Condition = { StringEquals = { "kms:ViaService" = "secretsmanager.${local.region}.${local.dns_suffix}" } }
      },
    ]
  })
}

resource "aws_eks_pod_identity_association" "platform" {
  for_each = local.platform_service_accounts

  cluster_name    = aws_eks_cluster.this.name
  namespace       = var.namespace
  service_account = each.value
  role_arn        = aws_iam_role.platform.arn
  tags            = local.tags

  depends_on = [aws_eks_addon.this]
}

resource "aws_security_group" "redis" {
  name        = "${var.name}-redis"
  description = "ElastiCache Redis: the cluster's nodes only"
  vpc_id      = local.vpc_id
  tags        = merge(local.tags, { Name = "${var.name}-redis" })
}

resource "aws_vpc_security_group_ingress_rule" "redis_from_cluster" {
  security_group_id            = aws_security_group.redis.id
  description                  = "Redis (TLS) from the cluster's nodes and pods"
  ip_protocol                  = "tcp"
  from_port                    = 6379
  to_port                      = 6379
  referenced_security_group_id = local.cluster_security_group_id
}

resource "aws_elasticache_subnet_group" "this" {
  name       = "${var.name}-redis"
  subnet_ids = local.private_subnet_ids
  tags       = local.tags
}

# The Redis AUTH token: drawn once by Secrets Manager, kept there for the
# platform's pods; later draws are ignored.
data "aws_secretsmanager_random_password" "redis" {
  password_length     = 64
  exclude_punctuation = true
}

resource "aws_secretsmanager_secret" "redis" {
  name_prefix = "${var.name}-redis-auth-"
  description = "${var.name}: the ElastiCache Redis AUTH token"
  kms_key_id  = aws_kms_key.data.arn
  tags        = local.tags
}

resource "aws_secretsmanager_secret_version" "redis" {
  secret_id     = aws_secretsmanager_secret.redis.id
  secret_string = data.aws_secretsmanager_random_password.redis.random_password

  lifecycle {
    ignore_changes = [secret_string]
  }
}

resource "aws_elasticache_replication_group" "this" {
  replication_group_id = "${var.name}-redis"
  description          = "${var.name}: llmplat limits, queues and node records"
  engine               = "redis"
  engine_version       = var.redis.engine_version
  node_type            = var.redis.node_type
  port                 = 6379
  num_cache_clusters   = var.redis.nodes

  automatic_failover_enabled = true
  multi_az_enabled           = true

  at_rest_encryption_enabled = true
  kms_key_id                 = aws_kms_key.data.arn
  transit_encryption_enabled = true
  transit_encryption_mode    = "required"
  auth_token                 = aws_secretsmanager_secret_version.redis.secret_string

  subnet_group_name  = aws_elasticache_subnet_group.this.name
  security_group_ids = [aws_security_group.redis.id]

  snapshot_retention_limit = 7
  apply_immediately        = false

  tags = local.tags

  lifecycle {
    ignore_changes = [auth_token]
  }
}
