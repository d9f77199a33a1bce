"""The defaults the documentation states are the code's: the option tables of
docs/receiver.md (`bgl receive`) and docs/carbon.md (carbon.conf's BG_* keys), and the
README's synopses of `bgl receive` and `bgl run`, read as text and compared with what the
code takes when nothing is given (the argument parsers, PluginOptions, the drain's
defaults), which read them from their one home (settings.py, ingest.policy.FlushPolicy,
receiver.options.ReceiverOptions)."""
from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from biggraphite_like import settings
from biggraphite_like.cli import build_parser
from biggraphite_like.ingest.policy import FlushPolicy
from biggraphite_like.receiver.options import ReceiverOptions
from carbon_plugin.connection_drain import drain_settings
from carbon_plugin.options import PluginOptions
from tests.paths import REPO_ROOT

ROOT = REPO_ROOT
CELL = re.compile(r"`([^`]*)`")
SYNOPSIS_OPTION = re.compile(r"\[(--[a-z-]+) ([0-9][0-9.]*)\]")
UNSET_MEANS = {"--self-metrics-interval": settings.DEFAULT_SELF_METRICS_INTERVAL}  # None in the parser


def subcommand(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def parser_defaults(name: str) -> dict[str, object]:
    """{--option: its default} of a `bgl` subcommand."""
    return {flag: action.default for action in subcommand(name)._actions
            for flag in action.option_strings if flag.startswith("--")}


def table_rows(path: Path, first_key: str) -> list[tuple[list[str], list[str]]]:
    """(keys, defaults) of each row of the option table whose first key starts with
    `first_key`: the back-quoted words of its first and second cells."""
    rows = []
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].startswith(f"`{first_key}"):
            rows.append((CELL.findall(cells[0]), CELL.findall(cells[1])))
    return rows


def as_number(text: str) -> float:
    return float(text.replace(",", ""))


def test_receiver_options_table_states_bgl_receive_defaults():
    defaults = parser_defaults("receive")
    rows = [(keys, values) for keys, values in table_rows(ROOT / "docs" / "receiver.md", "--")
            if len(keys) == len(values)]  # rows whose default is in words ("see above", "carbon's defaults")
    checked = {}
    for keys, values in rows:
        for key, value in zip(keys, values):
            assert key in defaults, f"docs/receiver.md documents {key}, which bgl receive does not take"
            checked[key] = value
    for key, value in checked.items():
        code = defaults[key]
        if isinstance(code, str):
            assert value == code, f"docs/receiver.md: {key} defaults to {value}, the code to {code}"
        else:
            assert as_number(value) == code, f"docs/receiver.md: {key} defaults to {value}, the code to {code}"
    assert {"--flush-interval", "--flush-size", "--max-buffered-points", "--retries", "--drain-timeout",
            "--stats-interval", "--max-connections", "--max-partial-bytes", "--partial-timeout",
            "--max-name-cache-bytes"} <= set(checked)


def test_bgl_receive_defaults_come_from_the_flush_policy_and_receiver_options():
    defaults, policy, options = parser_defaults("receive"), FlushPolicy(), ReceiverOptions()
    assert defaults["--flush-interval"] == policy.flush_interval == options.flush_interval
    assert defaults["--flush-size"] == policy.flush_size == options.flush_size
    assert defaults["--max-buffered-points"] == policy.max_buffered_points == options.max_buffered_points
    assert defaults["--retries"] == policy.retries == options.retries
    assert defaults["--line-port"] == settings.LINE_PORT and defaults["--carbonlink-port"] == settings.CARBONLINK_PORT


def test_carbon_options_table_states_the_plugins_defaults():
    options = PluginOptions.from_settings({"BG_STORE": "sqlite:///unused.db"})
    timeout, idle = drain_settings({})
    code = {"BG_FLUSH_INTERVAL": options.flush_interval, "BG_FLUSH_SIZE": options.flush_size,
            "BG_MAX_BUFFERED_POINTS": options.max_buffered_points, "BG_RETRIES": options.retries,
            "BG_RETRY_DELAY": options.retry_delay, "BG_RETRY_MAX_DELAY": options.retry_max_delay,
            "BG_LOOKUP_BATCH": options.lookup_batch, "BG_MAX_LOGGED_ERRORS": options.max_logged_errors,
            "BG_WRITER_PROCESS": options.writer_process, "BG_LOG_FLUSHES": options.log_flushes,
            "BG_DRAIN_TIMEOUT": timeout, "BG_DRAIN_IDLE": idle}
    documented = {}
    for keys, values in table_rows(ROOT / "docs" / "carbon.md", "BG_"):
        if keys[0] == "BG_STORE":
            continue
        assert len(keys) == len(values), f"docs/carbon.md: the row of {keys} gives {values}"
        documented.update(zip(keys, values))
    assert set(documented) == set(code), "docs/carbon.md's table and PluginOptions name different keys"
    for key, value in documented.items():
        expected = code[key]
        if isinstance(expected, bool):
            assert value == str(expected).lower(), f"docs/carbon.md: {key} defaults to {value}, the code to {expected}"
        else:
            assert as_number(value) == expected, f"docs/carbon.md: {key} defaults to {value}, the code to {expected}"


def test_the_plugin_and_bgl_receive_share_the_flush_policys_defaults():
    options, policy = PluginOptions(store_url="sqlite:///unused.db"), FlushPolicy()
    assert (options.flush_interval, options.flush_size, options.max_buffered_points, options.retries,
            options.retry_delay, options.retry_max_delay) == (
        policy.flush_interval, policy.flush_size, policy.max_buffered_points, policy.retries, policy.retry_delay,
        policy.retry_max_delay)


@pytest.mark.parametrize("command", ["receive", "run"])
def test_readme_synopsis_states_the_defaults(command):
    text = (ROOT / "README.md").read_text()
    start = text.index(f"bgl [--store URL] {command} ")
    synopsis = text[start:].split("\nbgl ")[0].split("```")[0]
    found = SYNOPSIS_OPTION.findall(synopsis)
    assert found, f"README's synopsis of bgl {command} states no default"
    defaults = parser_defaults(command)
    for option, value in found:
        code = defaults[option]
        code = UNSET_MEANS.get(option, code) if code is None else code
        assert (value if isinstance(code, str) else as_number(value)) == code, \
            f"README: bgl {command} {option} defaults to {value}, the code to {code}"
