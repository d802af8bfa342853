#!/usr/bin/env bash
# Idempotent: installs HAProxy (Debian package) for the cluster profile (`make up TOPOLOGY=cluster`, tests/cluster/).
# A no-op when `haproxy` is already on PATH; needs root or sudo otherwise.
set -euo pipefail
if command -v haproxy >/dev/null 2>&1; then
  echo "setup: haproxy present ($(haproxy -v 2>/dev/null | head -1))"
  exit 0
fi
echo "setup: installing the Debian package haproxy (cluster profile)"
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends haproxy
# The package's own service is not used (the stack starts its own haproxy on loopback); stop it if it started.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet haproxy 2>/dev/null; then
  $SUDO systemctl stop haproxy || true
fi
haproxy -v | head -1
