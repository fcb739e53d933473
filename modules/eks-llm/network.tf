# The VPC, unless an existing one is given: private subnets for nodes and
# data stores (tagged for internal load balancers and Karpenter), public
# subnets for NAT and an internet-facing load balancer.

locals {
  create_vpc = var.vpc_id == null
  azs        = length(var.availability_zones) > 0 ? var.availability_zones : slice(data.aws_availability_zones.available.names, 0, 3)

  vpc_id             = local.create_vpc ? aws_vpc.this[0].id : var.vpc_id
  private_subnet_ids = local.create_vpc ? aws_subnet.private[*].id : var.private_subnet_ids
  public_subnet_ids  = local.create_vpc ? aws_subnet.public[*].id : var.public_subnet_ids
}

resource "aws_vpc" "this" {
  count = local.create_vpc ? 1 : 0

  cidr_block           = var.vpc_cidr
  enable_dns_support   = true
  enable_dns_hostnames = true
  tags                 = merge(local.tags, { Name = var.name })
}

resource "aws_subnet" "private" {
  count = local.create_vpc ? length(local.azs) : 0

  vpc_id            = aws_vpc.this[0].id
  availability_zone = local.azs[count.index]
  # Large private subnets: every pod takes a VPC address.
  cidr_block = cidrsubnet(var.vpc_cidr, 2, count.index)
  tags = merge(local.tags, local.discovery_tag, {
    Name                              = "${var.name}-private-${local.azs[count.index]}"
    "kubernetes.io/role/internal-elb" = "1"
  })
}

resource "aws_subnet" "public" {
  count = local.create_vpc ? length(local.azs) : 0

  vpc_id            = aws_vpc.this[0].id
  availability_zone = local.azs[count.index]
  cidr_block        = cidrsubnet(cidrsubnet(var.vpc_cidr, 2, 3), 4, count.index)
  tags = merge(local.tags, {
    Name                     = "${var.name}-public-${local.azs[count.index]}"
    "kubernetes.io/role/elb" = "1"
  })
}

resource "aws_internet_gateway" "this" {
  count = local.create_vpc ? 1 : 0

  vpc_id = aws_vpc.this[0].id
  tags   = merge(local.tags, { Name = var.name })
}

resource "aws_eip" "nat" {
  count = local.create_vpc ? (var.single_nat_gateway ? 1 : length(local.azs)) : 0

  domain = "vpc"
  tags   = merge(local.tags, { Name = "${var.name}-nat-${count.index}" })
}

resource "aws_nat_gateway" "this" {
  count = local.create_vpc ? (var.single_nat_gateway ? 1 : length(local.azs)) : 0

  allocation_id = aws_eip.nat[count.index].id
  subnet_id     = aws_subnet.public[count.index].id
  tags          = merge(local.tags, { Name = "${var.name}-nat-${count.index}" })

  depends_on = [aws_internet_gateway.this]
}

resource "aws_route_table" "public" {
  count = local.create_vpc ? 1 : 0

  vpc_id = aws_vpc.this[0].id
  route {
    cidr_block = "0.0.0.0/0"
    gateway_id = aws_internet_gateway.this[0].id
  }
  tags = merge(local.tags, { Name = "${var.name}-public" })
}

resource "aws_route_table_association" "public" {
  count = local.create_vpc ? length(local.azs) : 0

  subnet_id      = aws_subnet.public[count.index].id
  route_table_id = aws_route_table.public[0].id
}

resource "aws_route_table" "private" {
  count = local.create_vpc ? length(local.azs) : 0

  vpc_id = aws_vpc.this[0].id
  route {
    cidr_block     = "0.0.0.0/0"
    nat_gateway_id = aws_nat_gateway.this[var.single_nat_gateway ? 0 : count.index].id
  }
  tags = merge(local.tags, { Name = "${var.name}-private-${local.azs[count.index]}" })
}

resource "aws_route_table_association" "private" {
  count = local.create_vpc ? length(local.azs) : 0

  subnet_id      = aws_subnet.private[count.index].id
  route_table_id = aws_route_table.private[count.index].id
}

# Given subnets get Karpenter's discovery tag (created ones carry it).
resource "aws_ec2_tag" "given_subnet_discovery" {
  for_each = local.create_vpc ? toset([]) : toset(var.private_subnet_ids)

  resource_id = each.value
  key         = "karpenter.sh/discovery"
  value       = var.name
}

# S3 through a gateway endpoint on the private route tables, not through
# the NAT gateway, which bills every GB it carries: a cold start copies a
# model's weights from the bucket (65.8 GiB for the 70B), and the nodes'
# image layers from ECR come from S3 too. A gateway endpoint has no hourly
# price. A given VPC gets one on the route tables named in
# private_route_table_ids (leave them out when it has one already: a route
# table takes one S3 endpoint).
locals {
  s3_endpoint_route_tables = local.create_vpc ? aws_route_table.private[*].id : var.private_route_table_ids
}

resource "aws_vpc_endpoint" "s3" {
  count = length(local.s3_endpoint_route_tables) > 0 ? 1 : 0

  vpc_id            = local.vpc_id
  service_name      = "com.amazonaws.${local.region}.s3"
  vpc_endpoint_type = "Gateway"
  route_table_ids   = local.s3_endpoint_route_tables
  tags              = merge(local.tags, { Name = "${var.name}-s3" })
}
