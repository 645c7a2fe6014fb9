#!/usr/bin/env bash
# Builds a real kube-apiserver (v1.20.2, Debian's source package) once and caches the binary, so the
# cluster suite (tests/cluster) can run the controller against the real thing with etcd.
#
# Why from source: Debian ships no kube-apiserver binary and only Debian's packages and PyPI are
# reachable here (no Go module proxy, no release downloads). Debian bookworm's `kubernetes` source
# package is the full 1.20 tree with vendor/, so it builds offline.
#
# Usage: scripts/build-kube-apiserver.sh          build if not cached; print the binary's path
#        LONGSHOREMAN_APISERVER_CACHE=DIR ...      cache somewhere else (default: .cache/apiserver)
# Re-runs with a cached binary take well under a second. Needs root for apt-get (CI and the
# developer machines run as root); without it, install the packages listed below yourself.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${LONGSHOREMAN_APISERVER_CACHE:-$root/.cache/apiserver}
version=1.20.5+really1.20.2-1.1+deb12u1
bin=$cache/kube-apiserver
packages=(golang-go etcd-server rsync dpkg-dev make openssl
          golang-github-modern-go-reflect2-dev golang-github-json-iterator-go-dev)
# Bumped whenever the recipe below changes, so a binary cached by an older recipe is rebuilt.
recipe="v1.20.2 reflect2-1.0.2 json-iterator-1.1.12 openapi-zero-value"

log() { printf '[build-kube-apiserver] %s\n' "$*" >&2; }

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
need_source=0
{ [ -x "$bin" ] && [ "$(cat "$cache/recipe" 2>/dev/null)" = "$recipe" ]; } || need_source=1

if [ ${#missing[@]} -gt 0 ] || [ $need_source = 1 ]; then
  # `apt-get source` needs deb-src lines; Debian 12 images carry deb822 sources with `Types: deb`.
  if [ $need_source = 1 ] && [ -f /etc/apt/sources.list.d/debian.sources ] \
     && ! grep -q '^Types:.*deb-src' /etc/apt/sources.list.d/debian.sources; then
    log "enabling deb-src in /etc/apt/sources.list.d/debian.sources"
    sed -i 's/^Types: deb$/Types: deb deb-src/' /etc/apt/sources.list.d/debian.sources
  fi
  log "apt-get update"
  apt-get update -qq
fi
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# etcd: Debian's etcd-server 3.4 is the storage. Link it beside the binary so the harness finds both.
mkdir -p "$cache"
[ -x "$cache/etcd" ] || ln -sf "$(command -v etcd || echo /usr/bin/etcd)" "$cache/etcd"

if [ $need_source = 0 ]; then
  echo "$bin"
  exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/kube-apiserver-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
log "apt-get source kubernetes=$version (about 34 MB)"
apt-get source -qq "kubernetes=$version" >/dev/null 2>&1
src=$(find . -maxdepth 1 -type d -name 'kubernetes-*' | head -1)
cd "$src"
# The vendored reflect2 v1.0.1 segfaults under Go >= 1.18 on the first custom-object create
# (reflect2.(*UnsafeMapType).UnsafeIterate); Debian's packaged copy is the fixed one.
rm -rf vendor/github.com/modern-go/reflect2
cp -r /usr/share/gocode/src/github.com/modern-go/reflect2 vendor/github.com/modern-go/reflect2
# json-iterator 1.1.12 is the release made for reflect2 1.0.2 (1.1.10 predates it).
rm -rf vendor/github.com/json-iterator/go
cp -r /usr/share/gocode/src/github.com/json-iterator/go vendor/github.com/json-iterator/go
# The OpenAPI type validator tells "null" from a zero value by comparing two reflect.Values with
# DeepEqual; since Go 1.19 reflect.Zero shares one zero buffer, so "" (and 0, false) compare
# equal to it and every custom object holding an empty string is refused ('Invalid value:
# "null": ... must be of type string'), which no real 1.20 cluster (built with Go 1.15) does.
# Later kube-openapi releases test `data == nil` alone; so does this build.
for f in vendor/k8s.io/kube-openapi/pkg/validation/validate/type.go vendor/github.com/go-openapi/validate/type.go; do
  [ -f "$f" ] || continue
  sed -i 's/if data == nil || reflect.DeepEqual(reflect.Zero(reflect.TypeOf(data)), reflect.ValueOf(data)) {/if data == nil {/' "$f"
  grep -q 'if data == nil {' "$f" || { log "could not patch $f"; exit 1; }
done
log "building cmd/kube-apiserver (about 6-7 minutes on 2 cores)"
# 1.20 builds in GOPATH mode and generates its openapi files: `make`, not `go build`.
export GOPROXY=off GOCACHE="$work/gocache"
make WHAT=cmd/kube-apiserver GOLDFLAGS="-s -w" >"$work/build.log" 2>&1 || { tail -50 "$work/build.log" >&2; exit 1; }
built=$(find _output -type f -name kube-apiserver -perm -u+x | head -1)
cp "$built" "$bin.tmp" && mv "$bin.tmp" "$bin"
echo "$recipe" >"$cache/recipe"
log "cached $bin ($(du -h "$bin" | cut -f1))"
echo "$bin"
