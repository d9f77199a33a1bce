"""The ingest core both ingest paths share: `bgl receive` (biggraphite_like.receiver) and
carbon's database plugin (carbon_plugin) are thin adapters over it. It imports nothing of
either, nor carbon or Twisted.

One module a concept:
    points.py        received points as flat arrays; Refusals, what was refused and why
    lines.py         carbon's plaintext lines decoded a read at a time (compiled: _plaintext.c)
    pickles.py       carbon's pickle frames decoded (unpickler.py: the bounded, restricted unpickler)
    buffer.py        names interned once, points as flat arrays until the flush; batches and their halves
    policy.py        FlushPolicy: flush interval and size, buffer bound, retries, and their defaults
    batch_writer.py  batches written in halves, retried with backoff (also `bgl write -`)
    refusal_log.py   the rate-limited log of bad input
    metadata.py      CarbonLink's get-metadata and set-metadata

Where names become canonical and points are checked: the accessor's module doc.
"""
