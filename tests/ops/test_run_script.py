"""`scripts/run.sh` starts `bgl run` without reinstalling when the environment is current
(issue #19 item 8): pip runs on the first start and when setup.cfg, pyproject.toml or
constraints.txt changed (their checksums are stamped in the venv), never otherwise.

Hermetic: the venv is a fresh one in tmp_path, and `python -m pip` finds a stand-in pip
first on PYTHONPATH that records its arguments and installs a `bgl` forwarding to this
checkout's.
"""
from __future__ import annotations

import subprocess

from tests.ops.fake_pip import fake_pip_env
from tests.paths import REPO_ROOT


def test_run_sh_installs_once_then_starts_directly(tmp_path):
    env = fake_pip_env(tmp_path)
    venv, log = tmp_path / "venv", tmp_path / "pip.log"

    def start() -> list[str]:
        result = subprocess.run(["bash", str(REPO_ROOT / "scripts" / "run.sh"), "--help"], env=env, capture_output=True,
                                text=True, timeout=300)
        assert result.returncode == 0, result
        assert result.stdout.startswith("usage: bgl run"), result.stdout
        return log.read_text().splitlines() if log.exists() else []

    # one install is two pip steps: the extra, then graphite-web without its Django<3.1 pin
    install = ["install -q --disable-pip-version-check -c constraints.txt -e .[run]",
               "install -q --disable-pip-version-check --no-deps -c constraints.txt graphite-web"]
    assert start() == install
    stamp = venv / ".bgl-install-stamp"
    assert "setup.cfg" in stamp.read_text() and "constraints.txt" in stamp.read_text()
    assert start() == install  # current: straight to bgl run
    assert start() == install
    stamp.write_text(stamp.read_text().replace("constraints.txt", "constraints.txt (older)"))
    assert start() == install * 2  # the pins changed: install again
    assert start() == install * 2
    (venv / "bin" / "bgl").unlink()
    assert start() == install * 3  # the environment lost its bgl: install again
