#!/usr/bin/env bash
# The test command: builds .venv (Python 3.11, pinned dependencies), installs Debian's chromium
# and chromium-driver for the browser tests when they are missing (as root), and runs the whole
# suite. Extra arguments go to pytest, e.g. `bash scripts/test.sh -k glob`.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3.11}
VENV=${BGL_VENV:-.venv}
if ! { [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; } && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing Debian's chromium and chromium-driver for the browser tests" >&2
  apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium chromium-driver victoria-metrics >&2
fi
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -c constraints.txt -e '.[test]'
# graphite-web 1.1.10 declares Django<3.1; it runs on the Django 3.2 LTS the extra pins (setup.cfg)
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps -c constraints.txt graphite-web
exec "$VENV/bin/python" -m pytest "$@"
