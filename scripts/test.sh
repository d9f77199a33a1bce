#!/usr/bin/env bash
# The test command: builds .venv (Python 3.11, pinned dependencies), installs the Debian packages
# the tests run (as root, when missing), and runs the whole suite. Extra arguments go to pytest,
# e.g. `bash scripts/test.sh -k glob`.
# The suite runs on BGL_TEST_WORKERS pytest-xdist workers (default 2; 0 runs it in this process),
# with --dist loadgroup: every real-node test on one worker (one node), and a module whose fixtures
# are set up once for the module on one worker (see tests/conftest.py).
# With java and mvn on PATH the suites also run on a real Apache Cassandra node (tests/cassandra_node,
# fetched through Maven, started by the tests); BGL_TEST_REAL_CASSANDRA=0 leaves it out.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3.11}
VENV=${BGL_VENV:-.venv}
# Debian packages some tests run for real: the browser (chromium, chromedriver), the peer of the
# benchmark (victoria-metrics) and libfaketime (faketime) for the clean job's clock test.
missing=""
for pair in chromium:chromium chromedriver:chromium-driver victoria-metrics:victoria-metrics faketime:faketime; do
  [ -x "/usr/bin/${pair%%:*}" ] || missing="$missing ${pair#*:}"
done
if [ -n "$missing" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing Debian's$missing for the tests" >&2
  apt-get update -q >&2
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing >&2
fi
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -c constraints.txt -e '.[test]'
# graphite-web 1.1.10 declares Django<3.1; it runs on the Django 3.2 LTS the extra pins (setup.cfg)
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps -c constraints.txt graphite-web
if command -v java >/dev/null && command -v mvn >/dev/null; then
  export BGL_TEST_REAL_CASSANDRA=${BGL_TEST_REAL_CASSANDRA:-1}  # a node that cannot start fails the run
else
  echo "java or mvn missing: the real Cassandra node's tests are skipped (see docs/cassandra.md)" >&2
fi
exec "$VENV/bin/python" -m pytest -n "${BGL_TEST_WORKERS:-2}" --dist loadgroup "$@"
