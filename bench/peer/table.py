"""The peer section of `python -m bench`'s table: rows (part, measure, ours, VictoriaMetrics,
ratio, peak memory ours, peak memory VictoriaMetrics) and its ratios, each above 1 where we
are better:

* ingest_vs_vm: points readable per second (all rounds); ingest_cpu_vs_vm: points per
  CPU-second until readable, each system's own CPU (probe cost taken off);
* bytes_vs_vm: VM's disk bytes per point over ours (geometric mean, young store and day);
* fetch_http_vs_vm: VM's query_range p50 over our /render p50, `day.*.*` over 1 day;
  render_wide_vs_vm: the same, geometric mean of the wide renders (X.*.* and
  sumSeries(X.*.*), 1,000 x 1 day and 20,000 x 1 hour at full size);
* find_http_vs_vm: VM's /metrics/find p50 over ours, distinct instances (treejson),
  geometric mean over the classes both answer alike; find_cached_vs_vm: the same pattern asked again (cache
  hits on both sides);
* names_load_vs_vm: VM's CPU-s to make N new names readable over ours; name_bytes_vs_vm:
  VM's bytes on disk per name (store less points) over ours;
* tags_find_vs_vm: VM's findSeries p50 over ours, geometric mean over the findSeries
  kinds; tags_autocomplete_vs_vm: the same over the autocomplete kinds with expressions;
  tags_index_vs_vm: our tagged series indexed per CPU-second over VM's; tag_bytes_vs_vm:
  VM's index bytes per series (every file but the points) over our tag tables'.
"""
from __future__ import annotations

import math
import statistics

RATIOS = ("ingest_vs_vm", "ingest_cpu_vs_vm", "bytes_vs_vm", "find_http_vs_vm", "find_cached_vs_vm",
          "fetch_http_vs_vm", "render_wide_vs_vm", "names_load_vs_vm", "name_bytes_vs_vm", "tags_find_vs_vm",
          "tags_autocomplete_vs_vm", "tags_index_vs_vm", "tag_bytes_vs_vm")
LABELS = {"ours": "bgl run", "ours_carbon": "bgl run --carbon", "whisper": "carbon+whisper", "vm": "VM"}


def mib(value: int | None) -> str:
    return f"{value / 2**20:,.0f} MiB" if value else ""


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.2f} ms" if seconds < 0.1 else f"{seconds * 1000:,.0f} ms"


def answer(result: dict) -> str:
    wrong = f", {result['mismatches']:,} series differ" if result["mismatches"] else ""
    return f"{result['points']:,} points{wrong}"


def p50_p99(row: dict, side: str) -> str:
    return f"{ms(row[side + '_s'])} / {ms(row[side + '_p99_s'])}"


def peer_rows(peer: dict) -> tuple[list[list[str]], dict[str, float]]:
    rows: list[list[str]] = []
    ratios: dict[str, float] = {}
    for part, function in (("ingest", _ingest), ("day", _day), ("find", _find), ("tags", _tags)):
        if part in peer:
            more, more_ratios = function(peer[part])
            rows += more
            ratios.update(more_ratios)
    if "ingest" in peer and "day" in peer:
        young, day = peer["ingest"]["young"], peer["day"]["day"]
        ratios["bytes_vs_vm"] = math.sqrt(day["vm"]["bytes_per_point"] / day["ours"]["bytes_per_point"]
                                          * young["vm"]["bytes_per_point"] / young["ours"]["bytes_per_point"])
    return rows, ratios


def _ingest(ingest: dict) -> tuple[list[list[str]], dict[str, float]]:
    rows = []
    rounds = {side: [row["new"], row["existing"]] for side, row in ingest["summary"].items()}
    peaks, receivers = ingest["peak_rss_bytes"], ingest["receiver_peak_rss_bytes"]
    for side in ("ours", "vm"):
        idle = ingest["idle"][side]
        probe = "its counters recorded every 0.25 s" if side == "ours" else "GET /metrics"
        rows.append(["peer", f"ingest: {LABELS[side]} at rest, CPU-s a second / extra CPU of one probe call ({probe})",
                     f"{idle['rate']:.4f} / {idle['per_call'] * 1e3:.2f} ms", "", "", "", ""])
    for index, (ours, vm) in enumerate(zip(rounds["ours"], rounds["vm"])):
        first = index == 0
        median = f" (median of {ours['rounds']})" if ours.get("rounds", 1) > 1 else ""
        label = f"ingest plaintext, {ingest['metrics']:,} metrics, {ours['round']} metrics{median}"
        rows.append(["peer", f"{label}, until readable", f"{ours['points_per_second']:,.0f} pts/s",
                     f"VM {vm['points_per_second']:,.0f} pts/s", f"{ours['points_per_second'] / vm['points_per_second']:.2f}x",
                     mib(peaks["ours"]) if first else "", mib(peaks["vm"]) if first else ""])
        rows.append(["peer", "  same, own CPU until readable (probe cost off), points per CPU-second (memory: the receiver;"
                     " above: the whole stack)",
                     f"{ours['cpu_readable']:.2f} CPU-s, {ours['points_per_cpu_second']:,.0f} pts/CPU-s",
                     f"VM {vm['cpu_readable']:.2f} CPU-s, {vm['points_per_cpu_second']:,.0f} pts/CPU-s",
                     f"{ours['points_per_cpu_second'] / vm['points_per_cpu_second']:.2f}x",
                     mib(receivers["ours"]) if first else "", mib(receivers["vm"]) if first else ""])
        rows.append(["peer", "  same, until idle (background work done): seconds, own CPU",
                     f"{ours['idle_seconds']:.1f} s, {ours['cpu_idle']:.2f} CPU-s",
                     f"VM {vm['idle_seconds']:.1f} s, {vm['cpu_idle']:.2f} CPU-s",
                     f"{vm['cpu_idle'] / max(ours['cpu_idle'], 1e-3):.2f}x", "", ""])
    for side, reference in (("ours_carbon", "whisper"), ("ours_carbon", "vm")):
        for ours, ref in zip(rounds[side], rounds[reference]):
            rows.append(["peer", f"ingest plaintext, {LABELS[side]} vs {LABELS[reference]}, {ours['round']} metrics,"
                         " readable (carbon sides dated by bench-side reads)", f"{ours['points_per_second']:,.0f} pts/s",
                         f"{LABELS[reference]} {ref['points_per_second']:,.0f} pts/s",
                         f"{ours['points_per_second'] / ref['points_per_second']:.2f}x", "", ""])
    totals = {side: [sum(r[key] for r in rounds[side]) for key in ("points", "seconds", "cpu_readable")]
              for side in ("ours", "vm")}
    ratios = {"ingest_vs_vm": (totals["ours"][0] / totals["ours"][1]) / (totals["vm"][0] / totals["vm"][1]),
              "ingest_cpu_vs_vm": (totals["ours"][0] / max(totals["ours"][2], 1e-3))
              / (totals["vm"][0] / max(totals["vm"][2], 1e-3))}
    rows.append(["peer", f"ingest answers: points read back equal to those sent (of {ingest['expected']['points']:,})",
                 answer(ingest["answers"]["ours"]), "VM " + answer(ingest["answers"]["vm"]), "", "", ""])
    young = ingest["young"]
    rows.append(["peer", f"disk bytes per point, young store ({ingest['points_per_round'] // ingest['metrics']}"
                 " points a metric)", f"{young['ours']['bytes_per_point']:,.1f} B", f"VM {young['vm']['bytes_per_point']:,.1f} B",
                 f"{young['vm']['bytes_per_point'] / young['ours']['bytes_per_point']:.2f}x", "", ""])
    return rows, ratios


def _day(day: dict) -> tuple[list[list[str]], dict[str, float]]:
    rows = []
    figures = day["day"]
    rows.append(["peer", f"disk bytes per point, 1 day at 60 s, {day['series']:,} series",
                 f"{figures['ours']['bytes_per_point']:,.1f} B", f"VM {figures['vm']['bytes_per_point']:,.1f} B",
                 f"{figures['vm']['bytes_per_point'] / figures['ours']['bytes_per_point']:.2f}x", "", ""])
    realistic = day["realistic"]
    rows.append(["peer", f"disk bytes per point, 1 day at 60 s, {day['series']:,} series, realistic gauges and counters",
                 f"{realistic['ours']['bytes_per_point']:,.2f} B", f"VM {realistic['vm']['bytes_per_point']:,.2f} B",
                 f"{realistic['vm']['bytes_per_point'] / realistic['ours']['bytes_per_point']:.2f}x", "", ""])
    for index, row in enumerate(day["renders"]):
        minutes = max(1, row["points"] // max(row["series"], 1))
        span = "1 day" if minutes >= 1440 else f"{minutes} min"
        answers = row["answers"]
        rows.append(["peer", f"/render {row['target']} ({row['series']:,} series x {span}) vs query_range, p50 / p99",
                     p50_p99(row, "ours"), f"VM {p50_p99(row, 'vm')}", f"{row['ratio']:.2f}x",
                     mib(day["peak_rss_bytes"]["ours"]) if index == 0 else "",
                     mib(day["peak_rss_bytes"]["vm"]) if index == 0 else ""])
        rows.append(["peer", "  answers: points equal to those sent", answer(answers["ours"]),
                     "VM " + answer(answers["vm"]), "", "", ""])
    export = day["export"]
    rows.append(["peer", "/render day.*.* vs /api/v1/export (raw points), p50 / p99", p50_p99(export, "ours"),
                 f"VM {p50_p99(export, 'vm')}", f"{export['ratio']:.2f}x", "", ""])
    for side, figures in day["concurrent"].items():
        renders = ", ".join(f"{r['status']} in {r['seconds']:.2f} s" for r in figures["renders"])
        rows.append(["peer", f"{len(figures['renders'])} x {day['renders'][3]['target']} at once ({LABELS[side]}):"
                     " each render; finds meanwhile (distinct), p50 / p99", renders if side == "ours" else "",
                     f"VM {renders}" if side == "vm" else "", "", "", ""])
        rows.append(["peer", f"  finds meanwhile ({LABELS[side]}), {figures['finds']} asked,"
                     f" {figures['find_errors']} failed", f"{ms(figures['find_p50_s'])} / {ms(figures['find_p99_s'])}",
                     "", "", "", ""])
    ratios = {"fetch_http_vs_vm": day["renders"][0]["ratio"],
              "render_wide_vs_vm": statistics.geometric_mean([row["ratio"] for row in day["renders"]])}
    return rows, ratios


def _find(find: dict) -> tuple[list[list[str]], dict[str, float]]:
    rows = []
    create, size = find["create"], find["name_bytes"]
    names = find["names"]
    ours, vm = create["ours"], create["vm"]
    rows.append(["peer", f"create {names:,} names (one plaintext point each), until readable: seconds, own CPU",
                 f"{ours['readable_seconds']:.1f} s, {ours['cpu_readable']:.2f} CPU-s",
                 f"VM {vm['readable_seconds']:.1f} s, {vm['cpu_readable']:.2f} CPU-s",
                 f"{vm['cpu_readable'] / max(ours['cpu_readable'], 1e-3):.2f}x", "", ""])
    rows.append(["peer", "  same, until idle", f"{ours['idle_seconds']:.1f} s, {ours['cpu_idle']:.2f} CPU-s",
                 f"VM {vm['idle_seconds']:.1f} s, {vm['cpu_idle']:.2f} CPU-s",
                 f"{vm['cpu_idle'] / max(ours['cpu_idle'], 1e-3):.2f}x", "", ""])
    rows.append(["peer", "  bytes on disk per name (store less points)", f"{size['ours']['bytes_per_name']:,.1f} B",
                 f"VM {size['vm']['bytes_per_name']:,.1f} B",
                 f"{size['vm']['bytes_per_name'] / size['ours']['bytes_per_name']:.2f}x", "", ""])
    rows.append(["peer", "  peak RSS: receiver after creating them; one graphite-web worker after the finds (VM: its"
                 " process)", f"{mib(find['receiver_peak_rss_bytes']['ours'])}; {mib(find['web_worker_peak_rss_bytes'])}",
                 f"VM {mib(find['peak_rss_bytes']['vm'])}", "", mib(find["peak_rss_bytes"]["ours"]),
                 mib(find["peak_rss_bytes"]["vm"])])
    for fmt, classes in find["find"].items():
        for row in classes:
            state = "same answers" if row["same"] else f"{row['differ_count']} DIFFER" + \
                ("" if row["errors"]["ours"] else ", left out of the ratio") + f"; e.g. {row['differ'][0]}"
            failed = "".join(f"; {'ours' if side == 'ours' else 'VM'} failed {len(e)}x"
                             for side, e in row["errors"].items() if e)
            entries = "entries" if fmt == "treejson" else "paths"  # treejson collapses the paths below the query
            rows.append(["peer", f"/metrics/find {row['kind']}, e.g. {find['classes'][row['kind']]}, {fmt},"
                         f" {row['runs']} distinct, ~{row['nodes_median']:,.0f} {entries}, {names:,} names, p50 / p99",
                         p50_p99(row, "ours"), f"VM {p50_p99(row, 'vm')} ({state}{failed})", f"{row['ratio']:.2f}x",
                         "", ""])
    for row in find["cached"]:
        rows.append(["peer", f"/metrics/find {row['pattern']} asked {row['runs']} times: cache hits, p50 / p99",
                     p50_p99(row, "ours"), f"VM {p50_p99(row, 'vm')}", f"{row['ratio']:.2f}x", "", ""])
    floor = find["floor"]
    rows.append(["peer", "empty request: graphite-web /version/ (Django's floor) vs VM /health, p50 / p99",
                 f"{ms(floor['ours']['p50_s'])} / {ms(floor['ours']['p99_s'])}",
                 f"VM {ms(floor['vm']['p50_s'])} / {ms(floor['vm']['p99_s'])}", "", "", ""])
    for gap in find["gaps"]:
        rows.append(["peer", f"glob {gap['pattern']} ({gap['gap']})", ", ".join(gap["ours"]) or "none",
                     "VM " + (", ".join(gap["vm"]) or "none"), "same" if gap["same"] else "VM gap", "", ""])
    same = [row["ratio"] for row in find["find"]["treejson"] if row["same"] or row["errors"]["ours"]]
    ratios = {"find_http_vs_vm": statistics.geometric_mean(same) if same else math.nan,
              "find_cached_vs_vm": statistics.geometric_mean([row["ratio"] for row in find["cached"]]),
              "names_load_vs_vm": vm["cpu_readable"] / max(ours["cpu_readable"], 1e-3),
              "name_bytes_vs_vm": size["vm"]["bytes_per_name"] / size["ours"]["bytes_per_name"]}
    return rows, ratios


def _tags(tags: dict) -> tuple[list[list[str]], dict[str, float]]:
    ours, vm = tags["index"]["ours"], tags["index"]["vm"]
    rows = [["peer", f"tags: index {tags['series']:,} new series ({tags['tags']} tags each, plaintext), until readable",
             f"{ours['series_per_second']:,.0f} series/s, {ours['series_per_cpu_second']:,.0f} per CPU-s",
             f"VM {vm['series_per_second']:,.0f} series/s, {vm['series_per_cpu_second']:,.0f} per CPU-s",
             f"{ours['series_per_cpu_second'] / vm['series_per_cpu_second']:.2f}x", "", ""]]
    if "bytes" in tags:
        ours_bytes, vm_bytes = tags["bytes"]["ours"], tags["bytes"]["vm"]
        vm_text = f"VM {vm_bytes['bytes_per_series']:,.1f} B (its index: every file but `data`, merged)"
        rows.append(["peer", "tags: bytes on disk per series, the tag index (our five tag tables with their indexes,"
                     " dbstat after a checkpoint)", f"{ours_bytes['tag_bytes_per_series']:,.1f} B", vm_text,
                     f"{vm_bytes['bytes_per_series'] / ours_bytes['tag_bytes_per_series']:.2f}x", "", ""])
        rows.append(["peer", "  same, our store less its points (the tag index, each series' metric row and name)",
                     f"{ours_bytes['bytes_per_series']:,.1f} B", vm_text,
                     f"{vm_bytes['bytes_per_series'] / ours_bytes['bytes_per_series']:.2f}x", "", ""])
    for row in tags["queries"]:
        state = "same answers" if row["same"] else f"{row['differ_count']} DIFFER, e.g. {row['differ'][0]}"
        rows.append(["peer", f"tags {row['kind']}, {row['runs']} distinct, ~{row['answer_median']:,.0f} items, p50 / p99",
                     p50_p99(row, "ours"), f"VM {p50_p99(row, 'vm')} ({state})", f"{row['ratio']:.2f}x", "", ""])
    finds = [row["ratio"] for row in tags["queries"] if row["kind"].startswith("find")]
    completions = [row["ratio"] for row in tags["queries"] if row["kind"].endswith("_expr")]
    ratios = {"tags_find_vs_vm": statistics.geometric_mean(finds),
              "tags_autocomplete_vs_vm": statistics.geometric_mean(completions),
              "tags_index_vs_vm": ours["series_per_cpu_second"] / vm["series_per_cpu_second"]}
    if "bytes" in tags:
        ratios["tag_bytes_vs_vm"] = tags["bytes"]["vm"]["bytes_per_series"] / tags["bytes"]["ours"]["tag_bytes_per_series"]
    return rows, ratios
