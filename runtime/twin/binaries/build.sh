#!/usr/bin/env bash
# Builds the cluster twin's binaries into the folder $1, from the module
# proxy at the versions this folder pins: kube-controller-manager and
# kube-scheduler (runtime/kubetest/binaries, the API server's module), KWOK
# and Karpenter's kwok provider (the modules beside this script), and
# KEDA's operator and metrics adapter at keda.version. KEDA's module
# replaces some of its dependencies, which only a build inside it honours,
# so it is built in a writable copy of the module taken from the module
# cache. Each binary is built into a temporary folder that replaces $1
# only when all are built.
set -euo pipefail
out=$1
here=$(cd "$(dirname "$0")" && pwd)
kube_mod=$here/../../kubetest/binaries
kube_version=$(awk '$1 == "k8s.io/kubernetes" {print $2}' "$kube_mod/go.mod")
keda_version=$(cat "$here/keda.version")
tmp=$out.tmp.$$
work=$(mktemp -d)
trap 'rm -rf "$tmp" "$work"' EXIT
mkdir -p "$tmp"

step() {
	local start=$(date +%s)
	echo "twinbins: building $1"
	shift
	"$@"
	echo "twinbins: built in $(( $(date +%s) - start )) s"
}

ldflags="-X k8s.io/component-base/version.gitVersion=$kube_version"
step "kube-controller-manager $kube_version" \
	bash -c "cd '$kube_mod' && go build -o '$tmp/kube-controller-manager' -ldflags '$ldflags' k8s.io/kubernetes/cmd/kube-controller-manager"
step "kube-scheduler $kube_version" \
	bash -c "cd '$kube_mod' && go build -o '$tmp/kube-scheduler' -ldflags '$ldflags' k8s.io/kubernetes/cmd/kube-scheduler"
step "kwok" bash -c "cd '$here/kwok' && go build -o '$tmp/kwok' sigs.k8s.io/kwok/cmd/kwok"
step "karpenter's kwok provider" bash -c "cd '$here/karpenter' && go build -o '$tmp/karpenter-kwok' sigs.k8s.io/karpenter/kwok"

keda_src=$(go mod download -json "github.com/kedacore/keda/v2@$keda_version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$keda_src" ] || { echo "twinbins: KEDA $keda_version not in the module cache" >&2; exit 1; }
cp -r "$keda_src" "$work/keda"
chmod -R u+w "$work/keda"
step "KEDA $keda_version operator" bash -c "cd '$work/keda' && go build -mod=mod -o '$tmp/keda-operator' ./cmd/operator"
step "KEDA $keda_version metrics adapter" bash -c "cd '$work/keda' && go build -mod=mod -o '$tmp/keda-adapter' ./cmd/adapter"

rm -rf "$out"
mv "$tmp" "$out"
