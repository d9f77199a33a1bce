"""A stand-in for pip in a fresh venv, for the tests of scripts/run.sh: it logs its arguments and
installs a `bgl` that runs the real one."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

BGL = shutil.which("bgl", path=os.path.dirname(sys.executable)) or shutil.which("bgl")
FAKE_PIP = """\
import os, sys
venv = os.environ["BGL_VENV"]
with open(os.environ["FAKE_PIP_LOG"], "a") as log:
    log.write(" ".join(sys.argv[1:]) + "\\n")
path = os.path.join(venv, "bin", "bgl")
with open(path, "w") as script:
    script.write("#!/bin/sh\\nexec {bgl} \\"$@\\"\\n")
os.chmod(path, 0o755)
"""


def fake_pip_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a run.sh start on a fresh venv tmp_path/venv whose pip is the
    stand-in, logging to tmp_path/pip.log."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    fake = tmp_path / "fake" / "pip"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "__main__.py").write_text(FAKE_PIP.replace("{bgl}", BGL))
    return dict(os.environ, BGL_VENV=str(venv), PYTHONPATH=str(tmp_path / "fake"), FAKE_PIP_LOG=str(tmp_path / "pip.log"))
