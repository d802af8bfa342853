#!/usr/bin/env bash
# Idempotent set-up of what only the console's browser test and the alert-rule tests need: Debian's chromium
# (driven over the DevTools protocol with websocket-client, already pinned in constraints.txt) and prometheus
# (for promtool). A second run only checks that the commands exist.
set -euo pipefail
say() { printf 'setup-browser: %s\n' "$*"; }

need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
if [ ${#need[@]} -gt 0 ]; then
  say "installing Debian packages: ${need[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
else
  say "chromium and promtool present"
fi
