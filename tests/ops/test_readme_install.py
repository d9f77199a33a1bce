"""The README's Install block, run literally in a fresh virtualenv on a copy of the
repository's files (its tracked files as they are in the work tree, no .venv): `bgl --help`
and `bgl run --help` must then work. pip uses its cache and the package registry. Slow
(a minute or more): `-m "not slow"` skips it locally; CI runs it."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.carbon_env import REPO_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


def install_block() -> list[str]:
    """The command lines of the first ```sh block under README's `## Install`."""
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme.split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "README.md's Install section has no ```sh block"
    return [line for line in block.group(1).splitlines() if line.strip() and not line.lstrip().startswith("#")]


def copy_tracked_files(destination: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, check=True).stdout
    for name in files.decode().split("\0"):
        source = REPO_ROOT / name
        if name and source.is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)


def starts_the_stack(line: str) -> bool:
    """`bgl run` without --help serves until Ctrl-C: checked with --help instead."""
    return re.search(r"\bbgl run\b", line) is not None and "--help" not in line


@pytest.mark.skipif(shutil.which("python3.11") is None, reason="python3.11 is not on PATH (the block runs it)")
def test_readme_install_block_works_in_a_fresh_venv(tmp_path):
    lines = install_block()
    assert any(starts_the_stack(line) for line in lines) and any("pip install" in line for line in lines)
    checkout = tmp_path / "repo"
    copy_tracked_files(checkout)
    assert not (checkout / ".venv").exists()
    env = {key: value for key, value in os.environ.items() if not key.startswith(("VIRTUAL_ENV", "PYTHONPATH", "BGL_"))}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if not p.startswith(str(REPO_ROOT)))
    script = "set -euxo pipefail\n" + "\n".join(line for line in lines if not starts_the_stack(line))
    script += "\n.venv/bin/bgl run --help\n"
    result = subprocess.run(["bash", "-c", script], cwd=checkout, env=env, capture_output=True, text=True,
                            timeout=1100)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-5000:]
    assert "usage: bgl" in result.stdout and "usage: bgl run" in result.stdout, result.stdout[-3000:]
    assert (checkout / ".venv" / "bin" / "bgl").exists()
    # the venv has the run extra's programs and graphite-web (what `bgl run` starts)
    check = subprocess.run([str(checkout / ".venv/bin/python"), "-c", "import graphite, gunicorn, carbon, whitenoise"],
                           capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stderr
