"""The operator's maintenance jobs, written once above the stores (any `Store` works).

One module per job: `clean` (stale metrics, empty directories, expiry), `delete` (by glob),
`repair` (missing ancestors, bad rows), `import_whisper` (whisper trees), `usage` (`du` and
`stats`), `backup` (SQLite backups and restores); `directories` holds the cleanup side of
the race protocol with creation, `progress` and `metrics_file` what every job reports with.
"""
