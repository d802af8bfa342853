#!/usr/bin/env bash
# Runs the Python SDK's unit tests on the oldest and newest Pythons it claims (3.9, 3.13), each in its own venv.
# Venvs live in sdk-python/.venv-py<version>/ and are rebuilt only when this script or the SDK's pins change (a stamp).
# Where pyenv or a version is absent the run is skipped, and says so; it never fails for a missing interpreter.
# `--prepare` only builds the venvs (`make setup` does, so `make test` times the tests, not the installs).
set -euo pipefail
prepare=0
[ "${1:-}" = "--prepare" ] && prepare=1
cd "$(dirname "$0")/../.."
VERSIONS=${HEADWATER_SDK_PYTHONS:-"3.9.18 3.13.0"}
PYENV_ROOT=${PYENV_ROOT:-$HOME/.pyenv}
# The SDK's runtime deps (and its `avro` extra) plus what its unit tests need, pinned per version: the newest
# releases of urllib3, pytest, hypothesis and fastavro no longer install on 3.9.
pins_for() {
  case "$1" in
    3.9.*) echo "urllib3==2.6.3 zstandard==0.25.0 fastavro==1.12.1 pytest==8.4.2 pytest-timeout==2.4.0" \
                "hypothesis==6.141.1" ;;
    *) echo "urllib3==2.8.0 zstandard==0.25.0 fastavro==1.13.1 pytest==9.2.0 pytest-timeout==2.4.0" \
            "hypothesis==6.170.15" ;;
  esac
}
stamp_of() { { cat "$0"; pins_for "$1"; } | sha256sum | cut -d' ' -f1; }
status=0
for version in $VERSIONS; do
  py="$PYENV_ROOT/versions/$version/bin/python"
  if [ ! -x "$py" ]; then
    echo "sdk-python tests on Python $version: SKIPPED ($py not found; install it with pyenv to run them)"
    continue
  fi
  venv="sdk-python/.venv-py$version"
  stamp="$(stamp_of "$version")"
  if [ ! -f "$venv/.stamp" ] || [ "$(cat "$venv/.stamp")" != "$stamp" ]; then
    rm -rf "$venv"
    "$py" -m venv "$venv"
    # shellcheck disable=SC2046
    "$venv/bin/pip" install -q --disable-pip-version-check $(pins_for "$version")
    echo "$stamp" > "$venv/.stamp"
  fi
  if [ "$prepare" = 1 ]; then
    echo "sdk-python: the Python $version venv is ready"
    continue
  fi
  echo "sdk-python unit tests on Python $version"
  # The SDK's own tests (sdk-python/tests/, its pyproject's pytest settings): no stack, no repository tooling.
  if ! (cd sdk-python && "../$venv/bin/python" -m pytest -q -p no:cacheprovider tests); then
    status=1
  fi
done
exit $status
