"""A native carbon-protocol receiver (`bgl receive`, started by `bgl run`): carbon's
plaintext (TCP, UDP) and pickle protocols in, CarbonLink for graphite-web, written through
the accessor in one batch per flush. No carbon, no Twisted.

One module a concept:
    points.py      a batch of points as flat arrays; the checks every protocol shares
    lines.py       plaintext decoded in bulk (numpy, bytes.split)
    pickles.py     pickle frames: carbon's layout read directly, anything else through unpickler.py
    unpickler.py   a bounded, restricted unpickler (depth, expansion, carbon's safe globals)
    framing.py     a TCP stream cut into lines / frames, with their size limits
    buffer.py      interned names and flat arrays until the flush; CarbonLink's view
    flusher.py     the flusher thread: one accessor batch per interval; where metrics are created
    listeners.py   the selectors I/O thread, back-pressure, the client limits, the SIGTERM drain
    limits.py      connections per listener, incomplete bytes, their timeout, the open files limit
    carbonlink.py  cache-query, cache-query-bulk, get-metadata, set-metadata
    rules.py       storage-schemas.conf and storage-aggregation.conf, carbon's rules
    stats.py       counters, carbon.agents.<host>.* self-metrics, Prometheus text file
    service.py     the parts assembled, the signals
"""
from biggraphite_like.receiver.service import Receiver, ReceiverOptions, serve

__all__ = ["Receiver", "ReceiverOptions", "serve"]
