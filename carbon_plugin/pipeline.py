"""carbon-cache's `write` pipeline processor with a fast path for plain names.

carbon 1.1.10's CacheFeedingProcessor parses every received name as a tagged series
(`TaggedSeries.parse(metric).path`, to put tags in order) before storing the point in its
cache: an object, a dict and a sorted join per point, about a fifth of carbon's receiving
thread for plain names (py-spy, issue 21). For a name without `;`, not in OpenMetrics
form (ending in `"}`) and not starting with `~`, that parse gives the name back unchanged,
so the point is stored directly; every other name goes through carbon's own code.

`register()` defines the subclass with carbon's plugin name (`write`), which carbon's
PluginRegistrar puts in place of carbon's class (as receivers.py does for the receivers);
it must run before carbon builds its pipeline (the launcher calls it from carbon's service
maker).
"""
from __future__ import annotations


def is_plain(metric: str) -> bool:
    """Whether carbon's TaggedSeries.parse(metric).path is metric itself, without parsing."""
    return bool(metric) and ";" not in metric and metric[0] != "~" and metric[-2:] != '"}'


def register() -> None:
    """Put the fast `write` processor in place of carbon's (before carbon sets up its pipeline)."""
    from carbon.cache import CacheFeedingProcessor
    from carbon.pipeline import Processor

    class PlainNameCacheFeeder(CacheFeedingProcessor):
        plugin_name = "write"  # replaces carbon's CacheFeedingProcessor

        def process(self, metric, datapoint):
            if is_plain(metric):
                self.cache.store(metric, datapoint)
                return Processor.NO_OUTPUT
            return super().process(metric, datapoint)
