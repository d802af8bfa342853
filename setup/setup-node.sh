#!/usr/bin/env bash
# Idempotent set-up of the TypeScript SDK: `npm ci` from the committed lockfile when it changed (stamp), then
# the package build (dist/ + build/). zstd-napi compiles its bundled zstd with node-gyp (python3, make, g++):
# `npm_config_build_from_source` skips prebuild-install's download attempt, which has no network here.
set -euo pipefail
cd "$(dirname "$0")/../sdk-typescript"
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "setup-node: node and npm are needed (Node.js >= 20)" >&2
  exit 1
fi
stamp=$( (cat package-lock.json; node --version) | sha256sum | cut -d' ' -f1)
if [ "$(cat node_modules/.headwater-stamp 2>/dev/null)" != "$stamp" ]; then
  echo "setup: installing the TypeScript SDK's npm packages (npm ci)"
  npm_config_build_from_source=true npm ci --no-audit --no-fund --loglevel=error
  echo "$stamp" > node_modules/.headwater-stamp
else
  echo "setup: npm packages up to date"
fi
build_stamp=$(find src test conformance scripts tsconfig*.json package-lock.json -type f 2>/dev/null | sort | xargs cat | sha256sum | cut -d' ' -f1)
if [ "$(cat build/.headwater-stamp 2>/dev/null)" != "$build_stamp" ] || [ ! -d dist ]; then
  echo "setup: building the TypeScript SDK"
  node scripts/build.mjs
  echo "$build_stamp" > build/.headwater-stamp
fi
