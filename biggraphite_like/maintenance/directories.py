"""Removing empty directories without ever orphaning a metric created meanwhile.

BigGraphite's cleaner (its issue #204) listed a directory as empty, then deleted it: a
metric created in between lost its parent and vanished from every glob. Neither store may
lock (Cassandra has no transactions), so the guarantee comes from a protocol in which each
side writes first and checks after:

- the **cleaner** deletes a directory D it found without children (C1: check, C2: delete),
  then checks D's children again (C3) and, if any appeared, re-creates D (C4) through
  `Accessor.create_directories`, which is itself a creator;
- the **creator** (`Accessor.create_metrics` / `create_directories`) writes its rows (W1:
  the ancestors, then the metric or directory), then reads which ancestors exist (W2) and
  writes the missing ones again (W3), checking what it wrote again in turn.

Why no interleaving leaves a name N (metric or directory) whose parent D is missing, once
both sides are done. Assume each read sees every write that completed before it started
(SQLite serialises transactions; Cassandra at QUORUM/LOCAL_QUORUM for metadata). Let w be
the last write of N (nothing deletes N after it, or N would not exist) and d the last
delete of D, done by a cleaner whose re-check C3 runs at r > d.

- d before w: whoever wrote N checks D's existence at k > w > d (W2; every write of a
  name is followed by such a check, including C4's and W3's own writes). Either D was
  written after d and still exists (d is the last delete), or the check finds it missing
  and writes it again. D exists.
- d after w: then r > d > w, and N exists from w on, so the cleaner's re-check sees N as a
  child of D and re-creates D. D exists.
- no delete of D: D was written by N's writer (W1 writes ancestors) and never removed.

So D exists; and D's last write was itself made by a creator or by C4, which checks D's
own parent after it, so the same argument climbs to the top: every ancestor of every
metric exists. The C1/C2 gap cannot remove a directory that had a child at C2 for long:
the child's existence at C3 brings it back. Interleavings of several cleaners (shards,
overlapping runs) are the same argument applied to the last delete of each directory.

Where the creator's W1 and its commit are one serializable transaction (SQLite's write
batch, `Store.atomic_write_batch`) and the metrics are created inside it (the receiver's
and the plugin's batches), W2 is skipped: no delete can fall between W1 and the commit,
so a delete d before the commit came before W1, whose ancestor rows then wrote D again.

What it costs: a creation reads its ancestors once more (one query a batch); a cleanup
reads each deleted batch's children once more. What it does not cover: a cleaner whose
reads miss completed writes (Cassandra at consistency ONE), and clock skew between
writers where the store orders writes by client timestamps; hence QUORUM for metadata.

A directory the cleaner re-creates may transiently be missing between C2 and C4: a glob
at that instant does not see it, as it would not see a metric not yet created.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Iterable, Sequence

from biggraphite_like import names as names_mod
from biggraphite_like.accessor import Accessor

BATCH = 1000  # directories checked and deleted per store call


@dataclasses.dataclass
class PruneResult:
    """What one pruning pass did."""

    checked: int = 0  # directory names looked at (a directory may be looked at twice: child, then parent)
    removed: int = 0  # deleted and still deleted after the re-check
    restored: int = 0  # deleted, then re-created because a child appeared meanwhile

    def add(self, other: "PruneResult") -> None:
        self.checked += other.checked
        self.removed += other.removed
        self.restored += other.restored


def prune_empty_directories(
    accessor: Accessor,
    candidates: Iterable[str],
    known_to_exist: bool = False,
    race_hook: Callable[[Sequence[str]], None] | None = None,
) -> PruneResult:
    """Delete the candidates that have no child, deepest first, then their parents left empty.

    known_to_exist: the candidates come from a directory scan (skip the existence check).
    race_hook (tests only) runs between the emptiness check and the delete.
    """
    store = accessor.store
    result = PruneResult()
    pending: dict[int, set[str]] = {}
    for name in candidates:
        pending.setdefault(name.count(".") + 1, set()).add(name)
    verified = set().union(*pending.values()) if known_to_exist else set()
    while pending:
        depth = max(pending)
        level = sorted(pending.pop(depth))
        for start in range(0, len(level), BATCH):
            chunk = level[start:start + BATCH]
            unverified = [d for d in chunk if d not in verified]
            if unverified:
                existing = store.existing_directories(unverified)
                chunk = [d for d in chunk if d in verified or d in existing]
            result.checked += len(chunk)
            if not chunk:
                continue
            busy = store.directories_with_children(chunk)  # C1
            empty = [d for d in chunk if d not in busy]
            if not empty:
                continue
            if race_hook is not None:
                race_hook(empty)
            store.delete_directories(empty)  # C2
            repopulated = _restore_repopulated(accessor, empty)  # C3, C4
            result.restored += len(repopulated)
            result.removed += len(empty) - len(repopulated)
            if depth > 1:
                parents = {names_mod.parent(d) for d in empty if d not in repopulated}
                pending.setdefault(depth - 1, set()).update(parents)
    return result


def _restore_repopulated(accessor: Accessor, deleted: Sequence[str]) -> set[str]:
    """Re-create the deleted directories that gained a child since they were found empty."""
    repopulated = accessor.store.directories_with_children(deleted)
    if repopulated:
        accessor.create_directories(sorted(repopulated))
    return repopulated


def live_directories(metric_names: Iterable[str]) -> set[str]:
    """Every ancestor of the given metrics: the directories a cleanup keeps."""
    return {a for name in metric_names for a in names_mod.ancestors(name)}
