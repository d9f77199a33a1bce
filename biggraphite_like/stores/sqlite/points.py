"""The SQLite store's points: whisper's ring of slots per metric and stage, cut into
windows (see the package docstring and windows.py for the rows of a window). Writes append
to open tails inside SQLite; a tail is merged into its window's chunk when the window's last
slot is written (the window seals: its chunk moves to the sealed rows) or the tail grows
long. Reads decode the rows of a batch of windows with numpy; expiry drops whole windows."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from biggraphite_like import chunks
from biggraphite_like.errors import (
    InvalidPoint,
    StoreError,
)
from biggraphite_like.point_check import MAX_TIMESTAMP
from biggraphite_like.retention import Retention, Stage
from biggraphite_like.stores.base import PointReads, StageTable, place_columns, place_on_grid
from biggraphite_like.stores.sqlite.schema import (
    DIRECT_BYTES,
    IDS_PER_QUERY,
    REQUESTS_PER_QUERY,
    merge_bytes,
    table_stage,
)
from biggraphite_like.stores.sqlite.windows import (
    MAX_KEY,
    OPEN,
    TAIL,
    WINDOW_SHIFT,
    decode_rows,
    last_tail_records,
    record_dtype,
    record_groups,
    ring_windows,
    rows_of,
    window_ids,
    window_of,
)


_MERGE_POINTS = 1 << 20  # window slots a merge decodes and encodes at a time (bounds its transient memory)
_GROUP_STATEMENT = 32  # tails sharing a record count and a newest timestamp that get a statement of their own
_LONG_TAILS = "bgl_long_tails"  # temp table: ids of the open tails an append made long (_watch_statements)


def _append_clause(item: int) -> str:
    """The upsert of an open tail whose records are `item` bytes: the records are appended,
    or replace the tail's last one when they are one record for the same slot (a
    downsampled point updated each minute)."""
    return (" ON CONFLICT (id) DO UPDATE SET newest = max(newest, excluded.newest), points = CAST(CASE"
            f"  WHEN length(excluded.points) = {item} AND substr(points, -{item}, 4) = substr(excluded.points, 1, 4)"
            f"  THEN substr(points, 1, length(points) - {item}) || excluded.points ELSE points || excluded.points END"
            " AS BLOB)")


def _watch_statements(table: str, limit: int) -> list[str]:
    """The connection's watch of the open tails of `table` that reach `limit` bytes: temp
    triggers (this connection's only, nothing in the file) put their ids in temp table
    _LONG_TAILS as the upsert writes them. A RETURNING clause instead gave a row to Python
    for every tail written (RETURNING cannot filter its rows), which cost SQLite and
    Python about 0.8 us a tail, 40% of the upsert (issue 32)."""
    watch = f"WHEN NEW.id & {TAIL} AND length(NEW.points) >= {limit} BEGIN" \
            f" INSERT OR IGNORE INTO {_LONG_TAILS} (id) VALUES (NEW.id); END"
    return [f"CREATE TEMP TABLE IF NOT EXISTS {_LONG_TAILS} (id INTEGER PRIMARY KEY)",
            f"CREATE TEMP TRIGGER IF NOT EXISTS {table}_long_insert AFTER INSERT ON main.{table} {watch}",
            f"CREATE TEMP TRIGGER IF NOT EXISTS {table}_long_update AFTER UPDATE OF points ON main.{table} {watch}"]


class PointsMixin:
    """write_points, read_points, expire_points and the dropping of a metric's points."""

    def _drop_points(self, name: str, retention: Retention | None, keep: Retention | None = None) -> None:
        """Delete a metric's points in the tables of `retention` (None: every stage table) but `keep`'s."""
        self._points_changed()
        key = self._key(name)
        kept = {StageTable(s, i > 0).name for i, s in enumerate(keep.stages)} if keep else set()
        if retention is None:
            tables = [self._stage_table(t) for t in self.stage_tables()]
        else:
            tables = [t for t in (StageTable(s, i > 0) for i, s in enumerate(retention.stages))
                      if self._table_exists(t)]
        for table in tables:
            if table.name in kept:
                continue
            count = ring_windows(table.stage.points, self._window_slots(table))
            ids = rows_of(window_ids(np.full(count, key), np.arange(count)))
            for start in range(0, len(ids), IDS_PER_QUERY):
                self._conn.execute(f"DELETE FROM {table.name} WHERE id IN (SELECT value FROM json_each(?))",
                                   (_json_ids(ids[start:start + IDS_PER_QUERY]),))

    def write_points(self, table, names, timestamps, values, counts=None) -> None:
        """Append the points to the open tails of their windows (whisper's ring: a point
        replaces its slot; of several points given for one slot, the last given wins).

        Appending happens inside SQLite, with no read back. A window whose last slot is
        written, or whose tail grows past merge_bytes, is then merged into its chunk.
        """
        if not len(timestamps):
            return
        self._check_schema()
        timestamps = np.asarray(timestamps, dtype=np.int64)
        bad = (timestamps < 1) | (timestamps > MAX_TIMESTAMP)
        if bad.any():
            raise InvalidPoint(f"timestamp {int(timestamps[bad][0])} is outside 1..{MAX_TIMESTAMP}:"
                               " the SQLite store keeps whisper's unsigned 32-bit timestamps")
        with self.write_batch(), self._errors(f"write points to {table.name}"):
            self._points_changed()
            self._ensure_table(table)
            self._write_keyed(table, self._keys_of(names), timestamps, values, counts)

    def _keys_of(self, names: Sequence[str]) -> np.ndarray:
        """The key of each name (a name per point: one C-level dict lookup each, the store
        is asked only for names not cached); MetricNotFound for a name that is no metric."""
        keys = list(map(self._keys.get, names))
        if None in keys:
            keys = [self._key(name) if key is None else key for name, key in zip(names, keys)]
        return np.fromiter(keys, dtype=np.int64, count=len(keys))

    def _write_keyed(self, table: StageTable, keys: np.ndarray, timestamps: np.ndarray, values: np.ndarray,
                     counts: np.ndarray | None, seal: bool = False) -> None:
        """write_points by metric key (timestamps already checked); `seal` merges every
        window written into its sealed chunk (conversions)."""
        if keys.max() >= MAX_KEY:
            raise StoreError(f"metric key {int(keys.max())} does not fit a row id: the metrics table has"
                             f" handed out {MAX_KEY} keys; copy the metrics to a new store")
        precision, points = table.stage.precision, table.stage.points
        width = self._window_slots(table)
        slots = (timestamps // precision) % points
        windows = window_ids(keys, slots // width)
        # the last given point of each slot, grouped by window (slots in order within one)
        step = np.diff(windows)
        if ((step > 0) | ((step == 0) & (np.diff(slots) > 0))).all():  # the downsampler's rows: in order already
            last = np.arange(len(slots))
        else:
            order = np.lexsort((np.arange(len(slots)), slots, windows))
            last = order[np.append(np.diff(windows[order]) | np.diff(slots[order]), 1) != 0]
        slots, windows = slots[last], windows[last]
        records = np.zeros(len(last), dtype=record_dtype(table))
        records["ts"] = timestamps[last]
        records["value"] = np.asarray(values, dtype=np.float64)[last]
        if table.aggregated:
            records["count"] = 1 if counts is None else np.asarray(counts, dtype=np.int64)[last]
        starts = np.flatnonzero(np.diff(windows, prepend=-1))  # one group per window
        ends = np.append(starts[1:], len(windows))
        ids = windows[starts]
        # the window's last slot (the last window of the ring may be shorter) seals it
        window = slots // width
        last_slot = slots % width == np.minimum(width, points - window * width) - 1
        full = np.logical_or.reduceat(last_slot, starts) if not seal else np.ones(len(ids), dtype=bool)
        item = records.dtype.itemsize
        limit = merge_bytes(table)
        # a window given DIRECT_BYTES of records at once (a backfill, a big flush) is merged into its chunk
        # directly: they would cost more as a tail than merging costs
        direct = (ends - starts) * item >= DIRECT_BYTES if not seal else np.ones(len(ids), dtype=bool)
        if direct.any():
            chosen = np.flatnonzero(direct)
            blobs = record_groups(records.tobytes(), item, starts, ends)
            self._merge(table, ids[chosen], full[chosen], {int(ids[k]): blobs[k] for k in chosen.tolist()})
        append = np.flatnonzero(~direct)
        if not len(append):
            return
        newest = np.maximum.reduceat(timestamps[last], starts)
        ids, full = ids[append], full[append]
        long = self._append_tails(table, ids | OPEN | TAIL, newest[append], records, starts[append],
                                  (ends - starts)[append], limit)
        if (long | full).any():
            self._merge(table, ids[long | full], full[long | full])

    def _append_tails(self, table: StageTable, rows: np.ndarray, newest: np.ndarray, records: np.ndarray,
                      firsts: np.ndarray, sizes: np.ndarray, limit: int) -> np.ndarray:
        """Append records[firsts[i]:firsts[i] + sizes[i]] to tail row rows[i] (unique),
        whose newest becomes at least newest[i]; returns whether each tail is `limit`
        bytes long or more after.

        One INSERT ... SELECT over json_each a group of tails sharing a record count and a
        newest timestamp (a flush's tails: a few groups, the timestamps being aligned to
        the stage's precision): no Python per row (issue 32). The tails of groups too
        small to be worth a statement go in one statement that reads each tail's newest
        and place in the records from its JSON item. The long tails are those the
        connection's temp triggers saw grow to `limit` (_watch_statements): no second
        lookup of each row, no row back to Python but theirs."""
        item = records.dtype.itemsize
        conn = self._conn
        for statement in _watch_statements(table.name, limit):
            conn.execute(statement)  # IF NOT EXISTS: a table dropped and made again gets its triggers back
        conn.execute(f"DELETE FROM temp.{_LONG_TAILS}")
        key = sizes * (MAX_TIMESTAMP + 1) + newest
        order = np.argsort(key, kind="stable")
        bounds = np.flatnonzero(np.diff(key[order], prepend=-1))
        ends = np.append(bounds[1:], len(order))
        small: list[np.ndarray] = []
        for first, end in zip(bounds.tolist(), ends.tolist()):
            group = order[first:end]
            if end - first < _GROUP_STATEMENT:
                small.append(group)
                continue
            for part in range(0, len(group), IDS_PER_QUERY):
                chosen = group[part:part + IDS_PER_QUERY]
                size = int(sizes[chosen[0]]) * item
                conn.execute(
                    f"INSERT INTO {table.name} (id, newest, points)"
                    f" SELECT j.value, ?2, substr(?3, j.key * {size} + 1, {size}) FROM json_each(?1) AS j"
                    f" WHERE true {_append_clause(item)}",
                    (_json_ids(rows[chosen]), int(newest[chosen[0]]), _gather(records, firsts[chosen], sizes[chosen])))
        if small:
            rest = np.concatenate(small)
            for part in range(0, len(rest), IDS_PER_QUERY):
                chosen = rest[part:part + IDS_PER_QUERY]
                width = sizes[chosen] * item
                spec = np.stack([rows[chosen], newest[chosen], np.cumsum(width) - width + 1, width], axis=1)
                conn.execute(
                    f"INSERT INTO {table.name} (id, newest, points)"
                    " SELECT j.value ->> 0, j.value ->> 1, substr(?2, j.value ->> 2, j.value ->> 3)"
                    f" FROM json_each(?1) AS j WHERE true {_append_clause(item)}",
                    (str(spec.tolist()), _gather(records, firsts[chosen], sizes[chosen])))
        long = conn.execute(f"SELECT id FROM temp.{_LONG_TAILS}").fetchall()
        conn.execute(f"DELETE FROM temp.{_LONG_TAILS}")
        return np.isin(rows, np.array(long, np.int64).reshape(-1))

    def _merge(self, table: StageTable, windows: np.ndarray, seal: np.ndarray,
               given: dict[int, bytes] | None = None) -> None:
        """Merge the open tails of windows (unique window ids) into their chunks; `given`:
        records of some of these windows (by window id) newer than their tail. A window to
        `seal`, or sealed already, is kept as its sealed chunk, any other as its open chunk;
        its other rows go. Windows go a slice of at most _MERGE_POINTS slots at a time: a
        seal burst (every metric's window ending at once) decoded whole held about 100
        bytes a point, 800 MiB for 10,000 windows of 720 points."""
        given = given or {}
        width = self._window_slots(table)
        step = max(1, min(IDS_PER_QUERY // 3, _MERGE_POINTS // width))
        for start in range(0, len(windows), step):
            part, part_seal = windows[start:start + step], seal[start:start + step]
            rows = self._conn.execute(
                f"SELECT id, points FROM {table.name} WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id",
                (_json_ids(rows_of(part)),)).fetchall()
            rows += [(i | OPEN | TAIL, given[i]) for i in part.tolist() if i in given]
            if not rows:
                continue
            ids = np.array([i for i, _ in rows], dtype=np.int64)
            cells = window_of(ids)
            group, ts, values, counts = decode_rows(table, width, cells, cells, (ids & TAIL).astype(bool),
                                                    [b for _, b in rows], sort=True)
            bounds = np.flatnonzero(np.diff(group, prepend=-1))
            merged = group[bounds]
            ends = np.append(bounds[1:], len(group)).tolist()
            blobs = chunks.encode_many([chunks.Points(ts[s:e], values[s:e], None if counts is None else counts[s:e])
                                        for s, e in zip(bounds.tolist(), ends)])
            sealed = np.isin(merged, part[part_seal]) | np.isin(merged, ids[(ids & OPEN) == 0])
            targets = np.where(sealed, merged, merged | OPEN)
            self._conn.execute(f"DELETE FROM {table.name} WHERE id IN (SELECT value FROM json_each(?))",
                               (_json_ids(np.concatenate([merged | OPEN | TAIL, merged[sealed] | OPEN])),))
            self._conn.executemany(
                f"INSERT INTO {table.name} (id, newest, points) VALUES (?, ?, ?)"
                " ON CONFLICT (id) DO UPDATE SET newest = excluded.newest, points = excluded.points",
                zip(targets.tolist(), np.maximum.reduceat(ts, bounds).tolist(), blobs))

    def read_points(self, table, names, starts, ends) -> PointReads:
        starts = np.asarray(starts, dtype=np.int64)
        ends = np.asarray(ends, dtype=np.int64)
        request, ids, blobs = self._read_rows(table, names, starts, ends)
        if not blobs:
            return PointReads.empty()
        cells = window_of(ids)
        request, ts, values, _ = decode_rows(table, self._window_slots(table), request, cells,
                                             (ids & TAIL).astype(bool), blobs)
        # a slot may hold a point of another turn of the ring: keep those inside the window, as whisper
        keep = (ts >= starts[request]) & (ts < ends[request])
        return PointReads(request[keep], ts[keep], values[keep])

    def read_grid(self, table, names, first, last, step) -> np.ndarray:
        """Store.read_grid with each layout of chunks decoded and placed in turn (small
        arrays, no flat copy of every point), then the open tails' last record of each slot
        placed over them (overlay_tails). A grid not on the stage's slots (another step, a
        first off the precision, wider than the ring) places the windows with a tail as
        decode_rows gives them."""
        grid = np.full((len(names), (last - first) // step), np.nan)
        request, ids, blobs = self._read_rows(table, names, np.full(len(names), first, np.int64),
                                              np.full(len(names), last, np.int64))
        if not blobs:
            return grid
        is_tail = (ids & TAIL).astype(bool)
        on_slots = step == table.stage.precision and first % step == 0 and grid.shape[1] <= table.stage.points
        if is_tail.any() and not on_slots:  # the rows of a (request, window) with a tail: decoded together
            pairs = request * (1 << 32) + (window_of(ids) >> WINDOW_SHIFT)
            hot = np.isin(pairs, pairs[is_tail])
        else:
            hot = is_tail
        cold = np.flatnonzero(~hot)
        owners = request[cold]
        for index, columns, values, _ in chunks.decode_groups([blobs[i] for i in cold.tolist()], (first, step)):
            place_columns(grid, owners[index][:, None], columns, values)
        if not hot.any():
            return grid
        hot = np.flatnonzero(hot)
        if on_slots:
            _overlay_tails(grid, table, first, *last_tail_records(table, request[hot], [blobs[i] for i in hot.tolist()]))
            return grid
        cells = window_of(ids[hot])
        rows, ts, values, _ = decode_rows(table, self._window_slots(table), request[hot], cells, is_tail[hot],
                                          [blobs[i] for i in hot.tolist()])
        place_on_grid(grid, rows, ts, values, first, step)
        return grid

    def _read_rows(self, table: StageTable, names: Sequence[str], starts: np.ndarray, ends: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, list[bytes]]:
        """(request, row id, bytes) of the rows of the windows read, in write order within
        each window (chunk, then tail), in a few statements per many thousand windows: the
        rows of one kind (sealed, or open: open chunks and tails, which most windows do not
        have) of a window read for a dense run of metric keys as one range of ids, so the
        ids of rows that do not exist cost no lookup each and those that do are read in one
        walk of the table's B-tree (see _id_ranges); the others by id."""
        empty = np.zeros(0, np.int64)
        if not len(names):
            return empty, empty, []
        self._check_schema()
        with self.read_snapshot(), self._errors(f"read points from {table.name}"):
            if not self._table_exists(table):
                return empty, empty, []
            request, windows = self._read_windows(table, names, starts, ends)
            wanted = rows_of(windows)
            unique, asked = np.unique(wanted, return_inverse=True)  # sorted: pages in order
            ranges, sparse = _id_ranges(unique)
            by_id = f"SELECT d.id, d.points FROM json_each(?) AS j CROSS JOIN {table.name} AS d ON d.id = j.value"
            by_range = (f"SELECT d.id, d.points FROM json_each(?) AS j CROSS JOIN {table.name} AS d"
                        " ON d.id BETWEEN json_extract(j.value, '$[0]') AND json_extract(j.value, '$[1]')")
            rows: list = []
            step = 3 * REQUESTS_PER_QUERY
            for query, ids in ((by_range, ranges), (by_id, sparse)):
                for start in range(0, len(ids), step):
                    rows += self._conn.execute(query, (_json_ids(ids[start:start + step]),)).fetchall()
        if not rows:
            return empty, empty, []
        found = np.array([i for i, _ in rows], dtype=np.int64)
        found_at = np.searchsorted(unique, found)
        asked_for = unique[np.minimum(found_at, len(unique) - 1)] == found  # a range also finds others' rows
        blobs = [b for _, b in rows] if asked_for.all() else [b for (_, b), a in zip(rows, asked_for.tolist()) if a]
        if not blobs:
            return empty, empty, []
        position = np.full(len(unique), -1, np.int64)
        position[found_at[asked_for]] = np.arange(len(blobs))
        hit = np.flatnonzero(position[asked.reshape(-1)] >= 0)  # (request, row) pairs found
        row = position[asked.reshape(-1)[hit]]
        if len(row) != len(blobs) or (np.diff(row) < 0).any():
            blobs = [blobs[i] for i in row.tolist()]
        return np.repeat(request, 3)[hit], wanted[hit], blobs

    def _stage_table(self, name: str) -> StageTable:
        """The StageTable of an existing datapoints table; SchemaMissing if it holds an older layout."""
        self._check_layout(name)
        precision, points = table_stage(name)
        return StageTable(Stage(precision, points), name.endswith("_aggr"))

    def _read_windows(self, table: StageTable, names: Sequence[str], starts: np.ndarray, ends: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
        """(request, window id) of the windows holding the slots of each read window.

        A read window that wraps around the ring covers the windows from its first to the
        ring's last, then from the first to its last; the whole ring when both ends fall in
        one ring window (every window is then read once: no point twice).
        """
        precision, points, size = table.stage.precision, table.stage.points, self._window_slots(table)
        count = ring_windows(points, size)
        keys = self._read_keys(names)
        first = -(-starts // precision)  # first slot index at or after start
        last = -(-ends // precision) - 1
        valid = (keys >= 0) & (last >= first)
        low, high = (first % points) // size, (last % points) // size
        wraps = first % points > last % points
        whole = (last - first + 1 >= points) | (wraps & (high >= low))
        low = np.where(whole, 0, low)
        spans = np.where(whole, count, (high - low) % count + 1)
        spans[~valid] = 0
        request = np.repeat(np.arange(len(names), dtype=np.int64), spans)
        offsets = np.arange(len(request), dtype=np.int64) - np.repeat(np.cumsum(spans) - spans, spans)
        return request, window_ids(keys[request], (low[request] + offsets) % count)

    def _read_keys(self, names: Sequence[str]) -> np.ndarray:
        """The key of each name, -1 for a name that is no metric: one C-level dict lookup a
        name, the names not cached looked up in one batch (a wide read after the key cache
        was forgotten asks the store once, not once a name)."""
        found = list(map(self._keys.get, names))
        if None in found:
            rows = self._metric_rows([name for name, key in zip(names, found) if key is None])
            self._keys.update((name, row[0]) for name, row in rows.items())
            found = [key if key is not None else rows[name][0] if name in rows else -1
                     for name, key in zip(names, found)]
        return np.fromiter(found, np.int64, len(found))

    def expire_points(self, now: int) -> int:
        """Drop the windows (every row of each) whose every point is older than its stage's
        duration.

        Returns the number of points in the dropped windows (a slot counted once). Older points
        sharing a window with a newer one stay until the window is rewritten or expires;
        the accessor never reads them (its windows never reach past a stage's duration).
        """
        self._check_schema()
        removed = 0
        with self.write_batch(), self._errors("expire points"):
            self._points_changed()
            for name in self.stage_tables():
                table = self._stage_table(name)
                cutoff = now - table.stage.precision * table.stage.points
                # the rows of a window go together: none has a point of the last duration
                window = f"({name}.id & ~{OPEN | TAIL})"
                expired = (f"newest < ?1 AND NOT EXISTS (SELECT 1 FROM {name} AS o WHERE o.id IN"
                           f" ({window}, {window} | {OPEN}, {window} | {OPEN | TAIL}) AND o.newest >= ?1)")
                cursor = self._conn.execute(f"SELECT id, points FROM {name} WHERE {expired} ORDER BY {window}, id",
                                            (cutoff,))
                held: list = []  # the rows of the last window of a page: its other rows may be on the next
                while rows := held + cursor.fetchmany(10_000):
                    ids = np.array([i for i, _ in rows], dtype=np.int64)
                    cells = window_of(ids)
                    whole = len(rows) if len(rows) == len(held) else int(np.searchsorted(cells, cells[-1]))
                    held = rows[whole:] if whole < len(rows) else []
                    if whole:
                        removed += len(decode_rows(table, self._window_slots(table), cells[:whole], cells[:whole],
                                                   (ids[:whole] & TAIL).astype(bool), [b for _, b in rows[:whole]])[0])
                self._conn.execute(f"DELETE FROM {name} WHERE {expired}", (cutoff,))
        return removed


def _overlay_tails(grid: np.ndarray, table: StageTable, first: int, rows: np.ndarray, timestamps: np.ndarray,
                   values: np.ndarray) -> None:
    """Place the winning tail records (rows[i], timestamps[i], values[i]: one a (row, slot))
    over a grid of the stage's slots from `first` (a multiple of the precision, at most a
    ring wide: a slot is at most one column) holding the chunks' points: a record wins its
    slot's column, and one outside the grid's time range (another turn of the ring) empties
    it, as whisper's slot then holds another timestamp."""
    precision, points = table.stage.precision, table.stage.points
    column = ((timestamps // precision) - first // precision) % points  # the slot's column
    inside = column < grid.shape[1]
    here = (timestamps - first) // precision == column  # the record's timestamp is that column's
    placed = np.where(here, values, np.nan)
    grid.reshape(-1)[rows[inside] * grid.shape[1] + column[inside]] = placed[inside]


def _gather(records: np.ndarray, firsts: np.ndarray, sizes: np.ndarray) -> bytes:
    """The bytes of records[firsts[i]:firsts[i] + sizes[i]] for each i, one after the other."""
    if (sizes == 1).all():
        return records[firsts].tobytes()
    offsets = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    return records[np.repeat(firsts, sizes) + offsets].tobytes()


def _id_ranges(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ranges, others) of sorted row ids: [first, last] of the ids of each window and kind
    (sealed, open: ids >> WINDOW_SHIFT) whose range spans fewer than twice as many metric
    keys as it asks for (the keys read are a dense run, as series created together are:
    the range reads at most as many rows of other metrics as asked for), and the ids of
    the others. A key has one sealed row id and two open ones (chunk, tail): id >> 1."""
    if not len(ids):
        return np.zeros((0, 2), np.int64), ids
    window = ids >> WINDOW_SHIFT
    key = ids >> 1
    starts = np.flatnonzero(np.diff(window, prepend=window[0] - 1))
    ends = np.append(starts[1:], len(ids))
    keys_asked = np.add.reduceat(np.diff(key, prepend=key[0] - 1) != 0, starts)
    first, last = ids[starts], ids[ends - 1]
    dense = (last >> 1) - (first >> 1) < 2 * keys_asked
    return np.stack([first[dense], last[dense]], axis=1), ids[~np.repeat(dense, ends - starts)]


def _json_ids(ids: np.ndarray) -> str:
    """The ids as a JSON array for json_each (a list's repr is one: a third faster than joining)."""
    return str(ids.tolist())
