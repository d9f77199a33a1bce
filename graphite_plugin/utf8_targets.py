"""Render targets that name metrics with characters past ASCII (`a.日本語`), which the store
accepts, without the cost of graphite-web's UTF8_METRICS.

With UTF8_METRICS off (graphite's default), graphite's target grammar reads a path
element as a `Word` of ASCII printables: `a.日本語` does not parse and the render answers
`[]`. UTF8_METRICS = True builds that `Word` from every printable of Unicode (1.1 million
characters): 4 s at import and 30-40 s at the first parse, in every gunicorn worker.
`install()` gives the ASCII `Word` the regular expression UTF8_METRICS' would have (any
character but whitespace, control characters and graphite's symbols), compiled once:
the same targets parse as with UTF8_METRICS = True, at once. Call it after Django's
settings are configured (it imports graphite's grammar); graphite_plugin.middleware does.
"""
from __future__ import annotations

import re

_installed = False


def install() -> None:
    """Make graphite's path elements accept non-ASCII characters (idempotent)."""
    global _installed
    if _installed:
        return
    import graphite.render.grammar_unsafe as grammar
    from pyparsing import Word

    if not grammar.settings.UTF8_METRICS:  # with it on, graphite's own (slow) Words do the same
        pattern = re.compile(rf"[^\s\x00-\x1f\x7f-\x9f{re.escape(grammar.symbols)}]+")
        words = _metric_words(grammar.grammar, set(grammar.validMetricChars), Word)
        if not words:
            raise RuntimeError("graphite's target grammar has no path element Word: graphite-web's version changed")
        for word in words:
            word.reString, word.re, word.re_match = pattern.pattern, pattern, pattern.match
            word.parseImpl = word.parseImpl_regex
            word.mayIndexError = False
    _installed = True


def _metric_words(element, chars: set, word_class) -> list:
    """Every Word of `chars` under a pyparsing element (pyparsing copies elements as it
    combines them: the path element's Word exists many times)."""
    found, seen, pending = [], set(), [element]
    while pending:
        item = pending.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, word_class) and item.initChars == chars:
            found.append(item)
        pending.extend(getattr(item, "exprs", ()) or ())
        if getattr(item, "expr", None) is not None:
            pending.append(item.expr)
    return found
