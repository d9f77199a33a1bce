"""`bgl`'s exit statuses, one home for the CLI, the receiver's own entry and the stack
(`bgl run`), which the CLI loads only when it runs; and what a failure prints."""
from __future__ import annotations

from biggraphite_like.errors import BglError, MissingDependency, SchemaMissing

EXIT_OK = 0
EXIT_ERROR = 1  # the operation failed or refused something
EXIT_USAGE = 2  # usage error, or a missing optional package
EXIT_BUSY = 3  # `bgl run`: another `bgl run` holds the data directory


def error_report(exc: BglError, store: str | None = None) -> tuple[str, int]:
    """What `bgl` and the receiver print for a failure, and their exit status: a store that
    does not exist says where its path came from (`store`: the URL given with --store)."""
    message = str(exc)
    if isinstance(exc, SchemaMissing):
        from biggraphite_like.stores.registry import missing_store_message  # only then: no store import at start

        message = missing_store_message(store) or message
    return message, EXIT_USAGE if isinstance(exc, MissingDependency) else getattr(exc, "exit_status", EXIT_ERROR)
