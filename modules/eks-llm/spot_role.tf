# EC2 launches spot instances for Karpenter's CreateFleet only once the
# account has the EC2 Spot service-linked role (AWSServiceRoleForEC2Spot).
# A fresh account has none, and Karpenter's role may not create it, so
# every launch in the spot pool failed (ServiceLinkedRoleCreationNotPermitted)
# and the spot models' bursts stayed Pending. The module creates it; an
# account that already has it (any earlier spot use) sets
# create_spot_service_linked_role = false, since creating it again fails.
resource "aws_iam_service_linked_role" "spot" {
  count = var.create_spot_service_linked_role ? 1 : 0

  aws_service_name = "spot.amazonaws.com"
  description      = "EC2 Spot, for Karpenter's spot GPU pool (${var.name})"
  tags             = local.tags
}

# With the flag off, the role must already be there: a warning at plan
# otherwise (a check block's data source fails nothing).
check "spot_service_linked_role" {
  data "aws_iam_roles" "spot" {
    name_regex  = "^AWSServiceRoleForEC2Spot$"
    path_prefix = "/aws-service-role/spot.amazonaws.com/"
  }

  assert {
    condition     = var.create_spot_service_linked_role || length(data.aws_iam_roles.spot.names) > 0
    error_message = "The account has no EC2 Spot service-linked role and create_spot_service_linked_role is false: every spot launch fails. Set it to true, or run: aws iam create-service-linked-role --aws-service-name spot.amazonaws.com"
  }
}
