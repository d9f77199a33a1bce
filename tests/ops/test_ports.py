"""tests/ports.py: the ports handed to the test servers are never handed out twice in one run,
by one process or by two (two pytest-xdist workers start servers at the same moment)."""
from __future__ import annotations

import os
import subprocess
import sys
import uuid

from tests.carbon_env import REPO_ROOT

HAND_OUT = """
import sys
from tests.ports import free_port
print(" ".join(str(free_port()) for _ in range(int(sys.argv[1]))))
"""


def _hand_out(run: str, count: int) -> list[int]:
    env = dict(os.environ, PYTEST_XDIST_TESTRUNUID=run, PYTHONPATH=str(REPO_ROOT))
    out = subprocess.run([sys.executable, "-c", HAND_OUT, str(count)], env=env, cwd=REPO_ROOT,
                         capture_output=True, text=True, check=True).stdout
    return [int(port) for port in out.split()]


def test_two_workers_of_one_run_never_get_the_same_port():
    # 2 x 600 ports drawn at random from ~27,000 would share about 13 without the reservation
    run = f"test-{uuid.uuid4().hex}"
    first, second = _hand_out(run, 600), _hand_out(run, 600)
    assert len(set(first)) == 600 and len(set(second)) == 600
    assert not set(first) & set(second)

