#!/usr/bin/env bash
# Installs the SQL function plugin package of the streaming rules (sql-functions/, editable) into the virtualenv,
# so its entry points (group headwater.sql_functions) are found. Idempotent: skipped when already installed.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${HEADWATER_VENV:-$PWD/.venv}
if "$VENV/bin/python" -c 'import importlib.metadata as m; m.distribution("headwater_sql_functions")' 2>/dev/null; then
  echo "setup: SQL function plugins up to date"
else
  echo "setup: installing the SQL function plugins (sql-functions/)"
  "$VENV/bin/pip" install -q --no-deps -e sql-functions
fi
