"""`bgl`'s exit statuses, one home for the CLI and the stack (`bgl run`), which the CLI
loads only when it runs."""

EXIT_OK = 0
EXIT_ERROR = 1  # the operation failed or refused something
EXIT_USAGE = 2  # usage error, or a missing optional package
EXIT_BUSY = 3  # `bgl run`: another `bgl run` holds the data directory
