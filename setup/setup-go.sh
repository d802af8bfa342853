#!/usr/bin/env bash
# Idempotent set-up of the Go SDK: a Go toolchain >= 1.22 (Debian's when none is installed) and the pinned
# modules of sdk-go/ and sdk-go/bench/ from the Go module proxy (go.sum checks every one).
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf 'setup-go: %s\n' "$*"; }
export GOTOOLCHAIN=local GOFLAGS="${GOFLAGS:-} -mod=readonly"

find_go() {
  for g in "$(command -v go 2>/dev/null || true)" /usr/local/go/bin/go /usr/lib/go-1.2[2-9]/bin/go; do
    if [ -n "$g" ] && [ -x "$g" ] && "$g" version | grep -qE 'go1\.(2[2-9]|[3-9][0-9])'; then
      echo "$g"
      return 0
    fi
  done
  return 1
}

if ! GO=$(find_go); then
  say "no Go >= 1.22 found: installing it from Debian"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  pkg=$(apt-cache search --names-only '^golang-1\.(2[2-9])-go$' | sort -V | tail -1 | cut -d' ' -f1)
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${pkg:-golang-go}"
  GO=$(find_go) || { say "Debian's Go is older than 1.22; install Go >= 1.22 (for example to /usr/local/go)"; exit 1; }
fi
# The Go linter beyond `go vet` (make test-go runs it), pinned; the checksum database verifies the download.
STATICCHECK_VERSION=v0.8.2
bin="$PWD/.headwater/bin"
if [ "$("$bin/staticcheck" -version 2>/dev/null | sed -E 's/.*\((.*)\)/v\1/')" != "$STATICCHECK_VERSION" ]; then
  say "installing staticcheck $STATICCHECK_VERSION"
  mkdir -p "$bin"
  GOFLAGS= GOBIN="$bin" "$GO" install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
fi
stamp=$(for f in sdk-go/go.sum sdk-go/bench/go.sum; do if [ -f "$f" ]; then cat "$f"; fi; done | sha256sum | cut -d' ' -f1)
if [ "$(cat .headwater/go-modules.stamp 2>/dev/null)" = "$stamp" ]; then
  say "Go modules up to date ($("$GO" version | cut -d' ' -f3))"
  exit 0
fi
say "downloading the pinned Go modules"
(cd sdk-go && "$GO" mod download)
if [ -f sdk-go/bench/go.mod ]; then (cd sdk-go/bench && "$GO" mod download); fi
mkdir -p .headwater
echo "$stamp" > .headwater/go-modules.stamp
