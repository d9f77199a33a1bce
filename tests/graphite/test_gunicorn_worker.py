"""graphite_plugin.gunicorn_worker's memory hook: freed memory given back to the system."""
from __future__ import annotations

from graphite_plugin.gunicorn_worker import FreedMemory, resident_bytes


def test_freed_memory_is_given_back_past_some_growth():
    """A worker that built and dropped a large answer (here 64 MiB of 2 KiB objects, from
    the C allocator) holds it until a trim; below TRIM_GROWTH of growth nothing is done."""
    freed = FreedMemory()
    assert freed._trim is not None, "glibc's malloc_trim is found"
    freed.trimmed_at = resident_bytes()
    assert freed.give_back(freed.trimmed_at + 1) == freed.trimmed_at + 1 and freed.trims == 0
    held = [bytes(2048) + bytes([i % 256]) for i in range(32 * 1024)]
    grown = resident_bytes()
    assert grown > freed.trimmed_at + freed.TRIM_GROWTH
    held.reverse()  # freed out of allocation order: holes the allocator keeps without a trim
    del held[::2]
    del held
    kept = resident_bytes()
    after = freed.give_back(kept)
    assert freed.trims == 1
    assert after == freed.trimmed_at and after < kept - (16 << 20), (kept >> 20, after >> 20)
