"""Graphite 1.1 tags: tagged series names, tag expressions, the query planner and the
index interface the stores implement (see docs/tags.md)."""
