"""The plugin's settings: `BG_*` keys of carbon.conf's [cache] section, with defaults.

Carbon hands every key of its configuration to the database plugin, unknown ones included,
already typed (ints and floats converted). Each option is documented in the README.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from biggraphite_like import settings as bgl_settings
from biggraphite_like.ingest.policy import DEFAULT as FLUSH


class InvalidPluginOption(ValueError):
    """A BG_* value in carbon.conf that cannot be used (says which and what is allowed)."""


@dataclasses.dataclass(frozen=True)
class PluginOptions:
    """How the plugin reaches the store and batches, retries and bounds its writes (the
    flush policy's defaults are ingest.policy.FlushPolicy's, as `bgl receive`'s)."""

    store_url: str
    flush_interval: float = FLUSH.flush_interval  # seconds a buffered point waits at most before its flush starts
    flush_size: int = FLUSH.flush_size  # points per store batch (one insert_columns call, one transaction)
    max_buffered_points: int = FLUSH.max_buffered_points  # write() waits (carbon's cache holds the rest) above this
    retries: int = FLUSH.retries  # attempts after a failure that cannot recover, before the points are dropped
    retry_delay: float = FLUSH.retry_delay  # first backoff, doubled on each retry
    retry_max_delay: float = FLUSH.retry_max_delay
    lookup_batch: int = 5_000  # names looked up in the store at once when exists() misses memory
    max_logged_errors: int = 10  # refused points logged per flush (all of them are counted)
    log_flushes: bool = False  # one log line per store batch
    writer_process: bool = True  # write the store from a child process (off carbon's GIL)

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> "PluginOptions":
        """Read BG_* keys (BG_STORE falls back to $BGL_STORE, then to the default store)."""
        url = str(settings.get("BG_STORE") or "").strip() or bgl_settings.default_store_url()
        values: dict[str, Any] = {"store_url": url}
        for field, key, kind, minimum in (
            ("flush_interval", "BG_FLUSH_INTERVAL", float, 0.01),
            ("flush_size", "BG_FLUSH_SIZE", int, 1),
            ("max_buffered_points", "BG_MAX_BUFFERED_POINTS", int, 1),
            ("retries", "BG_RETRIES", int, 0),
            ("retry_delay", "BG_RETRY_DELAY", float, 0.0),
            ("retry_max_delay", "BG_RETRY_MAX_DELAY", float, 0.0),
            ("lookup_batch", "BG_LOOKUP_BATCH", int, 1),
            ("max_logged_errors", "BG_MAX_LOGGED_ERRORS", int, 0),
        ):
            value = number_setting(settings, key, kind, minimum)
            if value is not None:
                values[field] = value
        values["log_flushes"] = _flag(settings, "BG_LOG_FLUSHES", False)
        values["writer_process"] = _flag(settings, "BG_WRITER_PROCESS", True)
        options = cls(**values)
        if options.max_buffered_points < options.flush_size:
            raise InvalidPluginOption(
                f"carbon.conf BG_MAX_BUFFERED_POINTS ({options.max_buffered_points}) must be at least"
                f" BG_FLUSH_SIZE ({options.flush_size})"
            )
        return options


def number_setting(settings: Mapping[str, Any], key: str, kind: type, minimum: float) -> Any:
    """carbon.conf's `key` as an int or float of at least `minimum`; None when absent."""
    raw = settings.get(key)
    if raw is None or raw == "":
        return None
    try:
        value = kind(raw)
    except (TypeError, ValueError):
        raise InvalidPluginOption(f"carbon.conf {key} = {raw!r}: expected a {kind.__name__}") from None
    if value < minimum:
        raise InvalidPluginOption(f"carbon.conf {key} = {raw!r}: must be at least {minimum}")
    return value


def _flag(settings: Mapping[str, Any], key: str, default: bool) -> bool:
    raw = settings.get(key)
    if raw is None or raw == "":
        return default
    text = str(raw).strip().lower()
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0"):
        return False
    raise InvalidPluginOption(f"carbon.conf {key} = {raw!r}: expected true or false")
