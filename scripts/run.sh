#!/usr/bin/env bash
# The main job: builds a venv (Python 3.11, pinned dependencies) and runs `bgl run`: our receiver
# (`bgl receive`) and graphite-web on the embedded SQLite store, until Ctrl-C (`--carbon`: carbon-cache
# with our plugin instead of the receiver). Extra arguments go to `bgl run`,
# e.g. `bash scripts/run.sh --data-dir /var/lib/bgl --web-port 8000`.
# The venv is .venv, or $BGL_VENV; $PYTHON creates it (default python3.11).
# pip runs only when the environment is new or setup.cfg, pyproject.toml or constraints.txt
# changed since the last install (a stamp of their checksums in the venv), and then says so on
# stderr first; a second start goes straight to `bgl run`, silently.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3.11}
VENV=${BGL_VENV:-.venv}
STAMP="$VENV/.bgl-install-stamp"
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
wanted="$(sha256sum setup.cfg pyproject.toml constraints.txt) extras=run"
if [ ! -x "$VENV/bin/bgl" ] || [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$wanted" ]; then
  echo "installing the pinned dependencies into $VENV (first start, or setup.cfg/constraints.txt changed)..." >&2
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -c constraints.txt -e '.[run]'
  # graphite-web 1.1.10 declares Django<3.1; it runs on the Django 3.2 LTS the extra pins (setup.cfg)
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps -c constraints.txt graphite-web
  printf '%s\n' "$wanted" > "$STAMP"
fi
exec "$VENV/bin/bgl" run "$@"
