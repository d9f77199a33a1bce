"""A native carbon-protocol receiver (`bgl receive`, started by `bgl run`): carbon's
plaintext (TCP, UDP) and pickle protocols in, CarbonLink for graphite-web, written through
the accessor in one batch per flush. No carbon, no Twisted.

The parts it shares with carbon's plugin (received points, plaintext and pickle decoding, the buffer,
the flush policy, batch writing and retries, the refusal log, CarbonLink's metadata
update) are in biggraphite_like.ingest. One module a concept here:
    options.py     ReceiverOptions: what `bgl receive` takes, with its defaults
    framing.py     a TCP stream cut into lines / frames, with their size limits
    flusher.py     the flusher thread: one accessor batch per interval; where metrics are created
    listeners.py   the selectors I/O thread, back-pressure, the client limits, the SIGTERM drain
    limits.py      connections per listener, incomplete bytes, their timeout, the open files limit
    carbonlink.py  cache-query, cache-query-bulk, get-metadata, set-metadata
    rules.py       storage-schemas.conf and storage-aggregation.conf, carbon's rules
    stats.py       counters, carbon.agents.<host>.* self-metrics, Prometheus text file
    service.py     the parts assembled, the signals
"""
from biggraphite_like.receiver.options import ReceiverOptions
from biggraphite_like.receiver.service import Receiver, serve

__all__ = ["Receiver", "ReceiverOptions", "serve"]
