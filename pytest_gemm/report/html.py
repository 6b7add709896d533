"""``index.html``: one static page with the run's facts, pictures and tables.

No script, no server, no network: styles are inline, pictures are files beside the page named by
relative paths, and every piece of text from the run is escaped. It opens from the file system.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..records.case_record import CaseRecord
from ..records.result import CaseResult
from ..records.verdicts import GateVerdict
from ..runs.data import RunData
from .failure import declared, diagnosis_lines, headline
from .names import kernel_key, kernel_labels
from .tables import COLUMNS, NUMERIC, cells, dtype_label, gate_tally

__all__ = ["page"]

_CSS = """
body { font: 15px/1.45 system-ui, sans-serif; color: #222; margin: 0 auto; max-width: 1200px; padding: 0 16px 48px; }
h1 { font-size: 1.6em; margin: 0.8em 0 0.2em; }
h2 { border-bottom: 2px solid #0072B2; padding-bottom: 2px; margin-top: 1.8em; }
code, pre { font: 13px/1.4 ui-monospace, monospace; background: #f3f3f3; }
pre { padding: 8px; overflow-x: auto; white-space: pre-wrap; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: left; vertical-align: top; }
th { background: #e8eef4; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.bad td { background: #fbe3d6; }
figure { margin: 1em 0; }
figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { font-size: 13px; color: #444; }
nav a { margin-right: 1em; }
.facts td:first-child { font-weight: 600; }
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], numeric: set[int], bad: Sequence[bool] = ()) -> str:
    """An HTML table; cells are escaped here."""
    out = ["<table>", "<tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr>"]
    for i, row in enumerate(rows):
        cls = ' class="bad"' if i < len(bad) and bad[i] else ""
        cells = "".join(
            f'<td class="num">{_e(c)}</td>' if j in numeric else f"<td>{_e(c)}</td>" for j, c in enumerate(row)
        )
        out.append(f"<tr{cls}>{cells}</tr>")
    out.append("</table>")
    return "\n".join(out)


def _fact(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {_fact(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(_fact(v) for v in value)
    return str(value)


def _figure(src: str, alt: str, caption: str) -> str:
    return (
        f'<figure><a href="{_e(src)}"><img src="{_e(src)}" alt="{_e(alt)}" loading="lazy"></a>'
        f"<figcaption>{_e(caption)}</figcaption></figure>"
    )


def _gate_cell(record: CaseRecord) -> str:
    gate = record.gate
    if gate is None:
        return ""
    change = f" {100 * gate.change:+.1f}%" if gate.change is not None else ""
    return f"{gate.verdict}{change}"


#: the terminal table's columns, with the gate's verdict and change before the flags
_HEAD = (*COLUMNS[:-1], "gate", COLUMNS[-1])


def _timing_section(records: Sequence[CaseRecord]) -> list[str]:
    out = ['<h2 id="tables">Timing tables</h2>']
    numeric = {i for i, column in enumerate(_HEAD) if column in NUMERIC}
    labels = kernel_labels(records)
    for dtype in dict.fromkeys(dtype_label(r.dtype, r.accumulate) for r in records):
        mine = [r for r in records if dtype_label(r.dtype, r.accumulate) == dtype]
        rows = [[{**cells(r, labels[kernel_key(r)]), "gate": _gate_cell(r)}[column] for column in _HEAD] for r in mine]
        bad = [r.gate is not None and r.gate.verdict == GateVerdict.REGRESSED for r in mine]
        out.append(f"<h3>{_e(dtype)}: {len(rows)} case(s)</h3>")
        out.append(_table(_HEAD, rows, numeric, bad))
    return out


def _failure_section(failures: Mapping[str, CaseResult], pictures: Mapping[str, str]) -> list[str]:
    out = [f'<h2 id="failures">Failed cases: {len(failures)}</h2>']
    for test, result in failures.items():
        assert result.diagnosis is not None
        lines = diagnosis_lines(result.diagnosis) or [headline(test.split("::")[-1], result)]
        lines += [f"declared in the header: {line}" for line in declared(result.diagnosis)]
        out.append(f"<h3><code>{_e(test)}</code></h3>")
        out.append("<ul>" + "".join(f"<li>{_e(line)}</li>" for line in lines) + "</ul>")
        src = pictures.get(test)
        if src:
            alt = f"heatmap of the error of {test.split('::')[-1]} over C"
            out.append(
                _figure(src, alt, "Worst |error| / bound per cell; causes in their own colours; tiles outlined.")
            )
    return out


def page(
    data: RunData, charts: Sequence[tuple[str, str]], heatmaps: Mapping[str, str], source: Path | None = None
) -> str:
    """The page. ``charts``: (relative path, caption) of each chart; ``heatmaps``: failed case's test -> path;
    ``source``: the saved run it was drawn from (None: the run is saved beside the page as run.json)."""
    gpu, day = data.gpu_name, data.day
    summary = f"{len(data.records)} timed case(s), {len(data.failures)} failed case(s) with a diagnosis"
    tally = gate_tally(data.records)
    if tally:
        summary += f"; gate: {tally}"
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>pytest-gemm report: {_e(gpu)}{', ' + _e(day) if day else ''}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>pytest-gemm report: {_e(gpu)}</h1>",
        f"<p><strong>Run:</strong> {_e(data.date or 'date unknown')}<br>",
        f"<strong>Command:</strong> <code>{_e(data.command or 'not recorded')}</code><br>",
        f"<strong>Cases:</strong> {_e(summary)}<br>",
        f"<strong>Drawn from:</strong> <code>{_e(source)}</code></p>"
        if source is not None
        else '<strong>The run:</strong> <a href="run.json">run.json</a> (pytest-gemm plot draws it again)</p>',
        '<nav><a href="#pictures">Pictures</a><a href="#failures">Failed cases</a>'
        '<a href="#tables">Timing tables</a><a href="#device">Device</a></nav>',
    ]
    out += [f"<p><em>{_e(note)}</em></p>" for note in data.notes]
    out.append('<h2 id="pictures">Pictures</h2>')
    out += [_figure(src, caption, caption) for src, caption in charts] or ["<p>No timed case: nothing to chart.</p>"]
    if data.failures:
        out += _failure_section(data.failures, heatmaps)
    else:
        out += ['<h2 id="failures">Failed cases: 0</h2>', "<p>Every verified output was within its bound.</p>"]
    if data.records:
        out += _timing_section(data.records)
    facts = [(str(k), _fact(v)) for k, v in data.gpu.items()]
    out += ['<h2 id="device">Device</h2>', '<div class="facts">', _table(("fact", "value"), facts, set()), "</div>"]
    out.append("</body></html>")
    return "\n".join(out) + "\n"
