#!/usr/bin/env bash
# Builds the pinned tools that tests and linters need into bin/ (git-ignored),
# reusing binaries that are already there. Needs only Go and the module proxy.
#
# Usage: hack/ensure-tools.sh [--print] [TOOL...]
#        hack/ensure-tools.sh --print-assets
#
#   TOOL            envtest | controller-gen | golangci-lint   (default: all)
#                   envtest = kube-apiserver, kubectl and etcd in one directory,
#                   the layout KUBEBUILDER_ASSETS expects.
#   --print         after ensuring, print each TOOL's absolute path on stdout
#                   (for envtest: the assets directory)
#   --print-assets  the same as `--print envtest`
#
# stdout carries only what --print asks for. Each build logs one line with its
# duration on stderr; when everything is already built, nothing is logged.
#
# Versions are pinned only in hack/tools/<module>/go.mod. Outputs are keyed by
# version, so bumping a pin rebuilds on the next run:
#   bin/k8s/<kubernetes version>/{kube-apiserver,kubectl,etcd}
#   bin/etcd-<version>     (bin/k8s/<kubernetes version>/etcd links to it)
#   bin/controller-gen-<version>
#   bin/golangci-lint-<version>
#
# Makefile:
#   KUBEBUILDER_ASSETS := $(shell hack/ensure-tools.sh --print-assets)
#   CONTROLLER_GEN := $(shell hack/ensure-tools.sh --print controller-gen)
#   GOLANGCI_LINT := $(shell hack/ensure-tools.sh --print golangci-lint)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0
unset GOOS GOARCH # the tools run here, even when the caller cross-compiles

usage() { sed -n '5,13s/^# \{0,1\}//p' "$0" >&2; exit "${1:-2}"; }

# pinned DIR MODULE [FORMAT]: the version (or FORMAT, a `go list -m` template)
# of MODULE as pinned by hack/tools/DIR/go.mod.
pinned() {
  local format=${3:-'{{.Version}}'}
  (cd "$root/hack/tools/$1" && go list -m -f "$format" "$2")
}

# build DIR OUT PKG [LDFLAGS]: unless OUT exists, build PKG with the
# requirements of hack/tools/DIR into OUT.
build() {
  local out=$2 start=$SECONDS
  [[ -x $out ]] && return
  mkdir -p "$(dirname "$out")"
  (cd "$root/hack/tools/$1" && go build -trimpath -ldflags "-s -w ${4:-}" -o "$out.tmp$$" "$3")
  mv -f "$out.tmp$$" "$out"
  echo "ensure-tools: built ${out#"$root"/} in $((SECONDS - start))s" >&2
}

envtest() {
  local kv ev ld="" p
  kv=$(pinned kube k8s.io/kubernetes)
  ev=$(pinned etcd go.etcd.io/etcd/server/v3)
  path=$root/bin/k8s/$kv
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=$kv -X $p.gitMajor=$(cut -d. -f1 <<<"${kv#v}")"
    ld+=" -X $p.gitMinor=$(cut -d. -f2 <<<"$kv") -X $p.gitTreeState=clean"
  done
  build kube "$path/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver "$ld"
  build kube "$path/kubectl" k8s.io/kubernetes/cmd/kubectl "$ld"
  build etcd "$root/bin/etcd-$ev" go.etcd.io/etcd/server/v3
  [[ $(readlink "$path/etcd" 2>/dev/null) == ../../etcd-$ev ]] ||
    ln -sfn "../../etcd-$ev" "$path/etcd"
}

print=false
case ${1:-} in
  --print) print=true; shift ;;
  --print-assets) (($# == 1)) || usage; print=true; set -- envtest ;;
  -h | --help) usage 0 ;;
  -*) usage ;;
esac
(($#)) || set -- envtest controller-gen golangci-lint

for tool; do
  case $tool in
    envtest) envtest ;;
    controller-gen)
      v=$(pinned controller-gen sigs.k8s.io/controller-tools)
      path=$root/bin/controller-gen-$v
      build controller-gen "$path" sigs.k8s.io/controller-tools/cmd/controller-gen \
        "-X sigs.k8s.io/controller-tools/pkg/version.version=$v" ;;
    golangci-lint)
      v=$(pinned golangci-lint github.com/golangci/golangci-lint/v2)
      path=$root/bin/golangci-lint-$v
      date=$(pinned golangci-lint github.com/golangci/golangci-lint/v2 \
        '{{with .Time}}{{.UTC.Format "2006-01-02T15:04:05Z"}}{{end}}')
      build golangci-lint "$path" github.com/golangci/golangci-lint/v2/cmd/golangci-lint \
        "-X main.version=${v#v} -X main.date=${date:-unknown}" ;;
    *) usage ;;
  esac
  if $print; then echo "$path"; fi
done
