#!/usr/bin/env bash
# The test command: builds .venv (Python 3.11, pinned dependencies) and runs the whole suite.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -k glob`.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3.11}
VENV=${BGL_VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -c constraints.txt -e '.[test]'
exec "$VENV/bin/python" -m pytest "$@"
