"""graphite_plugin.gunicorn_worker's memory hook: freed memory given back to the system."""
from __future__ import annotations

import json
import subprocess
import sys

from tests.paths import REPO_ROOT

# run in a fresh interpreter: the allocator's state of a test process (what earlier tests
# left in its heap) decides whether a free gives memory back by itself
SCENARIO = """
import json
from graphite_plugin.gunicorn_worker import FreedMemory, resident_bytes

freed = FreedMemory()
freed.trimmed_at = start = resident_bytes()
small = freed.give_back(start + 1), freed.trims
held = [bytes(2048) + bytes([i % 256]) for i in range(32 * 1024)]  # 64 MiB from the C allocator
pin = [bytes(2048) for _ in range(64)]  # above them in the heap: their free cannot shrink it
grown = resident_bytes()
del held
kept = resident_bytes()
after = freed.give_back(kept)
print(json.dumps({"start": start, "small": small, "grown": grown, "kept": kept, "after": after,
                  "trims": freed.trims, "trimmed_at": freed.trimmed_at, "growth": freed.TRIM_GROWTH,
                  "found": freed._trim is not None}))
"""


def test_freed_memory_is_given_back_past_some_growth():
    """A worker that built and dropped a large answer (64 MiB of 2 KiB objects, from the C
    allocator) holds it until a trim; below TRIM_GROWTH of growth nothing is done."""
    done = subprocess.run([sys.executable, "-c", SCENARIO], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["found"], "glibc's malloc_trim is found"
    assert seen["small"] == [seen["start"] + 1, 0], "no trim below TRIM_GROWTH"
    assert seen["kept"] > seen["start"] + seen["growth"], f"the allocator kept the freed memory: {seen}"
    assert seen["trims"] == 1 and seen["after"] == seen["trimmed_at"]
    assert seen["after"] < seen["kept"] - (32 << 20), seen
