#!/usr/bin/env bash
# Idempotent set-up of a fresh machine: Debian packages (JDK, Maven), the Python virtualenv from the pinned
# requirements, the SDK in editable mode, and the JVM jars from Maven Central. A second run only checks stamps.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=${HEADWATER_VENV:-$ROOT/.venv}
JARS=$ROOT/.headwater/jars
PYTHON=${PYTHON:-python3}
t0=$(date +%s)

say() { printf 'setup: %s\n' "$*"; }

# 1. Debian packages: a JDK 17+ and Maven (both present on the reference machine; installed when missing).
need_pkgs=()
if ! command -v java >/dev/null 2>&1 || ! java -version 2>&1 | grep -qE 'version "(1[7-9]|2[0-9])'; then
  need_pkgs+=(openjdk-17-jdk-headless)
fi
command -v mvn >/dev/null 2>&1 || need_pkgs+=(maven)
"$PYTHON" -c 'import venv, ensurepip' 2>/dev/null || need_pkgs+=(python3-venv)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  say "installing Debian packages: ${need_pkgs[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_pkgs[@]}"
fi
"$PYTHON" -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is needed, found " + sys.version' 

# 2. Python virtualenv from the pinned requirements (constraints.txt locks the transitive versions).
stamp_of() { for f in "$@"; do if [ -f "$f" ]; then echo "$f"; cat "$f"; fi; done | sha256sum | cut -d' ' -f1; }
py_inputs=(requirements.txt constraints.txt sdk-python/pyproject.toml)
py_stamp=$(stamp_of "${py_inputs[@]}")
if [ ! -x "$VENV/bin/python" ]; then
  say "creating virtualenv $VENV"
  "$PYTHON" -m venv "$VENV"
fi
if [ "$(cat "$VENV/.headwater-stamp" 2>/dev/null)" != "$py_stamp" ]; then
  say "installing Python packages (pinned)"
  "$VENV/bin/pip" install -q --upgrade "pip==25.3"
  "$VENV/bin/pip" install -q -r requirements.txt -c constraints.txt
  if [ -f sdk-python/pyproject.toml ]; then
    "$VENV/bin/pip" install -q --no-deps -e sdk-python
  fi
  echo "$py_stamp" > "$VENV/.headwater-stamp"
else
  say "Python packages up to date"
fi

# 3. JVM jars from Maven Central, one folder per pom (Kafka broker, MirrorMaker 2, Spark connectors).
mkdir -p "$JARS"
for pom in stack/maven/*/pom.xml; do
  name=$(basename "$(dirname "$pom")")
  stamp=$(stamp_of "$pom")
  if [ "$(cat "$JARS/$name.stamp" 2>/dev/null)" = "$stamp" ] && [ -d "$JARS/$name" ]; then
    say "jars for $name up to date"
    continue
  fi
  say "fetching jars for $name from Maven Central"
  rm -rf "$JARS/$name.tmp"
  mvn -B -q -Dstyle.color=never -f "$pom" org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$JARS/$name.tmp"
  rm -rf "$JARS/$name"
  mv "$JARS/$name.tmp" "$JARS/$name"
  echo "$stamp" > "$JARS/$name.stamp"
done

# 4. The Go SDK's toolchain check and its pinned modules (sdk-go/, sdk-go/bench/).
bash setup/setup-go.sh
# 5. The TypeScript SDK (sdk-typescript/): npm ci from its lockfile, then its build.
bash setup/setup-node.sh
# 6. Chromium and promtool for the console's browser test and the alert-rule tests.
bash setup/setup-browser.sh
# 7. The SQL function plugins of the streaming rules (sql-functions/).
bash setup/setup-sql-functions.sh
# 8. The Python SDK's venvs on its oldest and newest Pythons (3.9, 3.13; skipped where pyenv lacks them).
bash sdk-python/scripts/test-pythons.sh --prepare

say "done in $(( $(date +%s) - t0 ))s"
