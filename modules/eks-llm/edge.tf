# TLS at the edge: an ACM certificate for the gateway's name, a Network Load
# Balancer whose TLS listeners end TLS and forward by IP to the gateway pods
# (443) and to the orchestrators' node socket, which on-premises agents dial
# out to (8443). The AWS Load Balancer Controller's TargetGroupBindings,
# applied by the in-cluster layer, keep the target groups' pods current.
# Streams and node sockets are long: the TCP idle timeout is an hour.

resource "aws_acm_certificate" "gateway" {
  domain_name       = var.gateway_domain
  validation_method = "DNS"
  key_algorithm     = "EC_prime256v1"
  tags              = local.tags

  lifecycle {
    create_before_destroy = true
  }
}

# Keyed by the name, known at plan (the validation options are not).
resource "aws_route53_record" "gateway_validation" {
  for_each = var.route53_zone_id == null ? toset([]) : toset([var.gateway_domain])

  zone_id         = var.route53_zone_id
  name            = one([for o in aws_acm_certificate.gateway.domain_validation_options : o.resource_record_name if o.domain_name == each.key])
  type            = one([for o in aws_acm_certificate.gateway.domain_validation_options : o.resource_record_type if o.domain_name == each.key])
  records         = [one([for o in aws_acm_certificate.gateway.domain_validation_options : o.resource_record_value if o.domain_name == each.key])]
  ttl             = 300
  allow_overwrite = true
}

# The wait for issuance, whoever serves the DNS: an NLB's TLS listener
# refuses a certificate still pending validation (UnsupportedCertificate),
# so the listeners take the certificate's ARN from here. With Route 53 the
# records above are written and checked; without it the apply waits until
# ACM sees the records you create (the output certificate_validations,
# readable after `terraform apply -target=<module>.aws_acm_certificate.gateway`).
resource "aws_acm_certificate_validation" "gateway" {
  certificate_arn         = aws_acm_certificate.gateway.arn
  validation_record_fqdns = var.route53_zone_id == null ? null : [for r in aws_route53_record.gateway_validation : r.fqdn]

  timeouts {
    create = var.certificate_validation_timeout
  }
}

resource "aws_security_group" "gateway_lb" {
  name        = "${var.name}-gateway-lb"
  description = "The gateway's load balancer: TLS from the clients' CIDRs"
  vpc_id      = local.vpc_id
  tags        = merge(local.tags, { Name = "${var.name}-gateway-lb" })
}

resource "aws_vpc_security_group_ingress_rule" "gateway_lb_tls" {
  for_each = toset(var.gateway_client_cidrs)

  security_group_id = aws_security_group.gateway_lb.id
  description       = "TLS from clients"
  ip_protocol       = "tcp"
  from_port         = 443
  to_port           = 443
  cidr_ipv4         = each.value
}

resource "aws_vpc_security_group_ingress_rule" "node_agents_tls" {
  for_each = toset(var.node_client_cidrs)

  security_group_id = aws_security_group.gateway_lb.id
  description       = "TLS from on-premises node agents"
  ip_protocol       = "tcp"
  from_port         = local.node_listener_port
  to_port           = local.node_listener_port
  cidr_ipv4         = each.value
}

locals {
  # The load balancer's subnets, and their ranges: its nodes' addresses,
  # which alone the gateway believes a PROXY protocol header from.
  gateway_lb_subnet_ids = var.gateway_internal ? local.private_subnet_ids : local.public_subnet_ids
  gateway_lb_cidrs = local.create_vpc ? tolist(var.gateway_internal ? aws_subnet.private[*].cidr_block : aws_subnet.public[*].cidr_block) : tolist([
    for id in local.gateway_lb_subnet_ids : data.aws_subnet.gateway_lb[id].cidr_block
  ])
  # The gateway's and the orchestrator's node socket's container ports
  # (templates/platform.yaml.tmpl), and the node listener's port.
  gateway_port       = 8080
  node_port          = 8090
  node_listener_port = 8443
  backend_ports      = { gateway = local.gateway_port, nodes = local.node_port }
}

resource "aws_vpc_security_group_egress_rule" "gateway_lb_to_pods" {
  for_each = local.backend_ports

  security_group_id            = aws_security_group.gateway_lb.id
  description                  = "To the ${each.key} pods"
  ip_protocol                  = "tcp"
  from_port                    = each.value
  to_port                      = each.value
  referenced_security_group_id = local.cluster_security_group_id
}

resource "aws_vpc_security_group_ingress_rule" "pods_from_gateway_lb" {
  for_each = local.backend_ports

  security_group_id            = local.cluster_security_group_id
  description                  = "The load balancer to the ${each.key} pods"
  ip_protocol                  = "tcp"
  from_port                    = each.value
  to_port                      = each.value
  referenced_security_group_id = aws_security_group.gateway_lb.id
}

# A given VPC's subnets are read for their ranges.
data "aws_subnet" "gateway_lb" {
  for_each = local.create_vpc ? toset([]) : toset(local.gateway_lb_subnet_ids)

  id = each.value
}

resource "aws_lb" "gateway" {
  name                             = "${var.name}-gateway"
  load_balancer_type               = "network"
  internal                         = var.gateway_internal
  subnets                          = local.gateway_lb_subnet_ids
  security_groups                  = [aws_security_group.gateway_lb.id]
  enable_cross_zone_load_balancing = true
  enable_deletion_protection       = var.database.deletion_protection
  tags                             = local.tags

  lifecycle {
    precondition {
      condition     = var.gateway_internal || length(local.public_subnet_ids) > 0
      error_message = "An internet-facing gateway (gateway_internal = false) needs public subnets."
    }
  }
}

# A gateway pod that stops drains first (120 s, -drain-delay): /healthz,
# this target group's health check, answers 503 while the gateway serves
# every connection as before, since the NLB goes on opening connections to
# a deregistered target for about 2 minutes (to one failing its health
# check, for some 30 s after the second failed check). Then it closes its
# listener and lets open streams finish within the gateway's shutdown
# budget (38 s); its terminationGracePeriodSeconds (160) covers both
# (templates/platform.yaml.tmpl). The deregistration delay keeps the
# target draining that long too, neither shorter (the NLB would drop flows
# the gateway still serves) nor longer than the pod lives.
# drain_test.go checks the relation against the rendered manifest.
#
# The TLS listener ends TLS here, so a pod sees the load balancer's address
# as every connection's source. Proxy protocol v2 tells it the client's: a
# header before the first byte, which the gateway reads from the load
# balancer's subnets alone (-proxy-protocol-from, in the platform
# description below), so the console counts failed sign-ins per client and
# not per load balancer node. Client IP preservation (also possible for a
# TCP target group of IP targets) would instead make the client the
# packets' source, which it cannot be for IPv6 clients of IPv4 pods, over
# PrivateLink, or for a client that is itself a target of this internal
# load balancer (no hairpinning): the header works on every path. Health
# checks carry a header too, the LOCAL command without a client, which the
# gateway takes as the load balancer's own connection.
resource "aws_lb_target_group" "gateway" {
  name                 = "${var.name}-gateway"
  port                 = local.gateway_port
  protocol             = "TCP"
  target_type          = "ip"
  vpc_id               = local.vpc_id
  deregistration_delay = 160
  proxy_protocol_v2    = var.gateway_proxy_protocol

  health_check {
    protocol            = "HTTP"
    path                = "/healthz"
    port                = "traffic-port"
    healthy_threshold   = 2
    unhealthy_threshold = 2
    interval            = 10
  }

  tags = local.tags
}

resource "aws_lb_listener" "gateway_tls" {
  load_balancer_arn        = aws_lb.gateway.arn
  port                     = 443
  protocol                 = "TLS"
  certificate_arn          = aws_acm_certificate_validation.gateway.certificate_arn
  ssl_policy               = "ELBSecurityPolicy-TLS13-1-2-Res-2021-06"
  tcp_idle_timeout_seconds = 3600

  default_action {
    type             = "forward"
    target_group_arn = aws_lb_target_group.gateway.arn
  }
}

# The orchestrators' node socket (/v1/nodes/connect, a WebSocket): agents
# keep it open for hours. A stopping replica drains as the gateway does
# (120 s: its /healthz, this health check, answers 503, and it serves its
# sockets and registers nodes that dial it meanwhile), then asks its nodes
# to reconnect elsewhere, by then through an NLB that no longer sends them
# back to it, and lets their requests finish on the old sockets for its
# shutdown grace (30 s), within the pods' terminationGracePeriodSeconds
# (160, templates/platform.yaml.tmpl); the target drains as long as the pod
# lives, and no longer: a longer delay only keeps a dead target listed.
# drain_test.go checks the relation against the rendered manifest.
resource "aws_lb_target_group" "nodes" {
  name                 = "${var.name}-nodes"
  port                 = local.node_port
  protocol             = "TCP"
  target_type          = "ip"
  vpc_id               = local.vpc_id
  deregistration_delay = 160

  health_check {
    protocol            = "HTTP"
    path                = "/healthz"
    port                = "traffic-port"
    healthy_threshold   = 2
    unhealthy_threshold = 2
    interval            = 10
  }

  tags = local.tags
}

resource "aws_lb_listener" "nodes_tls" {
  load_balancer_arn        = aws_lb.gateway.arn
  port                     = local.node_listener_port
  protocol                 = "TLS"
  certificate_arn          = aws_acm_certificate_validation.gateway.certificate_arn
  ssl_policy               = "ELBSecurityPolicy-TLS13-1-2-Res-2021-06"
  tcp_idle_timeout_seconds = 3600

  default_action {
    type             = "forward"
    target_group_arn = aws_lb_target_group.nodes.arn
  }
}

resource "aws_route53_record" "gateway" {
  count = var.route53_zone_id == null ? 0 : 1

  zone_id = var.route53_zone_id
  name    = var.gateway_domain
  type    = "A"

  alias {
    name                   = aws_lb.gateway.dns_name
    zone_id                = aws_lb.gateway.zone_id
    evaluate_target_health = true
  }
}

# The AWS Load Balancer Controller, for the TargetGroupBinding only: it
# registers the gateway pods' IPs in the target group.
resource "aws_iam_role" "lb_controller" {
  name               = "${var.name}-lb-controller"
  assume_role_policy = local.pod_identity_trust
  tags               = local.tags
}

resource "aws_iam_role_policy" "lb_controller" {
  name = "target-group-binding"
  role = aws_iam_role.lb_controller.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [
      {
        Sid      = "Targets"
        Effect   = "Allow"
        Action   = ["elasticloadbalancing:RegisterTargets", "elasticloadbalancing:DeregisterTargets"]
        Resource = [aws_lb_target_group.gateway.arn, aws_lb_target_group.nodes.arn]
      },
      {
        Sid    = "Read"
        Effect = "Allow"
        Action = [
          "elasticloadbalancing:DescribeTargetGroups", "elasticloadbalancing:DescribeTargetHealth",
          "elasticloadbalancing:DescribeLoadBalancers", "elasticloadbalancing:DescribeListeners",
          "elasticloadbalancing:DescribeTags", "ec2:DescribeInstances", "ec2:DescribeNetworkInterfaces",
          "ec2:DescribeSecurityGroups", "ec2:DescribeSubnets", "ec2:DescribeVpcs",
        ]
        Resource = "*"
      },
    ]
  })
}

resource "aws_eks_pod_identity_association" "lb_controller" {
  cluster_name    = aws_eks_cluster.this.name
  namespace       = "kube-system"
  service_account = "aws-load-balancer-controller"
  role_arn        = aws_iam_role.lb_controller.arn
  tags            = local.tags

  depends_on = [aws_eks_addon.this]
}
