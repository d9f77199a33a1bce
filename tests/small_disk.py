"""A small file system of its own for full-disk tests: a tmpfs mounted for the test (as
root), resized with `mount -o remount` (grown to give space back)."""
from __future__ import annotations

import os
import shutil
import subprocess

IS_ROOT = os.geteuid() == 0


class SmallDisk:
    """A directory on a small file system of its own (tmpfs, as root)."""

    def __init__(self, path, size_mib: int):
        self.path = path
        self.size_mib = size_mib
        path.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mib}m,mode=0700", "tmpfs", str(path)], check=True)

    def resize(self, size_mib: int) -> None:
        """Remount at another size: larger gives space back (the operator freed some), smaller
        makes an emptier disk full sooner."""
        subprocess.run(["mount", "-o", f"remount,size={size_mib}m", str(self.path)], check=True)
        self.size_mib = size_mib

    def free_bytes(self) -> int:
        return shutil.disk_usage(self.path).free

    def unmount(self) -> None:
        if subprocess.run(["umount", str(self.path)]).returncode != 0:
            subprocess.run(["umount", "-l", str(self.path)], check=True)
