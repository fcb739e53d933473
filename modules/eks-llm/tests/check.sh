#!/usr/bin/env bash
# The EKS module's offline checks, run by `make test` (make tfcheck):
# terraform fmt -check over every Terraform file of the repository, then for
# the AWS layer `terraform init` from a filesystem mirror of hashicorp/aws,
# `terraform validate` and `terraform test` (a mocked aws provider), and
# the same for examples/eks/bootstrap (the state bucket). Nothing
# is downloaded. The mirror is TF_PLUGIN_MIRROR, or a folder named
# tf-plugins found near the filesystem's root; without it (or without
# terraform) the checks are skipped, and fail under CI=true.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)

missing() {
	if [ "${CI:-}" = true ]; then
		echo "tfcheck: $1 (under CI=true this fails the run)" >&2
		exit 1
	fi
	echo "tfcheck: SKIPPED: $1"
	exit 0
}

command -v terraform >/dev/null 2>&1 || missing "no terraform on the PATH"

mirror=${TF_PLUGIN_MIRROR:-}
if [ -z "$mirror" ]; then
	while IFS= read -r d; do
		if [ -d "$d/registry.terraform.io/hashicorp/aws" ]; then
			mirror=$d
			break
		fi
	done < <(find / -maxdepth 3 -type d -name tf-plugins 2>/dev/null)
fi
[ -n "$mirror" ] && [ -d "$mirror/registry.terraform.io/hashicorp/aws" ] ||
	missing "no filesystem mirror of hashicorp/aws (set TF_PLUGIN_MIRROR to a folder holding registry.terraform.io/hashicorp/aws)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The project's own CLI configuration: the mirror only, never the home
# directory's, no network.
cat >"$work/terraform.rc" <<RC
provider_installation {
  filesystem_mirror {
    path    = "$mirror"
    include = ["registry.terraform.io/hashicorp/*"]
  }
}
RC
export TF_CLI_CONFIG_FILE="$work/terraform.rc" CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1

cd "$root"
files=$(git ls-files '*.tf' '*.tftest.hcl' | wc -l)
if ! out=$(terraform fmt -check -recursive -list=true modules examples 2>&1); then
	echo "tfcheck: terraform fmt -check: these files need terraform fmt:" >&2
	echo "$out" >&2
	exit 1
fi
echo "tfcheck: terraform fmt -check: $files files formatted"

# check copies the stack at $1 (relative to the checkout) into the work
# folder, so init leaves nothing in the checkout, then validates and tests it.
check() {
	cp -r "$root/$1" "$work/$(basename "$1")"
	cd "$work/$(basename "$1")"
	if ! out=$(terraform init -backend=false -input=false -no-color 2>&1); then
		echo "$out" >&2
		exit 1
	fi
	if ! out=$(terraform validate -no-color 2>&1); then
		echo "$out" >&2
		exit 1
	fi
	echo "tfcheck: terraform validate $1: ${out}"
	if ! out=$(terraform test -no-color 2>&1); then
		echo "$out" | grep -v '^  - ' >&2
		exit 1
	fi
	echo "$out" | grep -E '^  run ' | sed 's/^/tfcheck: /'
	echo "tfcheck: terraform test $1: $(echo "$out" | grep -E '^(Success|Failure)!')"
}

# The AWS layer, and the state bucket of examples/eks (its bootstrap stack).
check modules/eks-llm
check examples/eks/bootstrap
