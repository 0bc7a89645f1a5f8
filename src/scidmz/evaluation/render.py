"""Reports rendered from results files by Jinja2 templates (``evaluation/templates/*.md.j2``).

One way to make every report: a study writes its numbers to ``results.json``
(``evaluation.results``), then ``render(template, out_dir, **context)`` turns
them into Markdown; ``--render-only`` repeats only this second pass, so a report
can be rewritten (a new analysis, a fixed sentence) without rerunning anything,
and its numbers cannot drift from the file. A template gets the study's
context and these helpers (all turn None, NaN and missing values into "n/a"):

- ``f(x, fmt="{:.3f}")``: a number through a ``str.format`` spec;
- ``pct(x)``: a signed percentage, ``+1.23 %``;
- ``ms(x)``: seconds -> milliseconds (a number, for ``f``);
- ``mbps(x)``: bit/s -> Mbit/s (a number, for ``f``);
- ``img(path, alt)``: a Markdown image line, the path relative to the report;
- ``join_f(xs, fmt, sep=" / ")``: several numbers with one format.

The environment trims block lines (``trim_blocks``, ``lstrip_blocks``) and
keeps the final newline; nothing is HTML-escaped (the output is Markdown).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["fmt_num", "render", "write_report"]


def fmt_num(x: Any, fmt: str = "{:.3f}", none: str = "n/a") -> str:
    """``fmt.format(x)``, or ``none`` for None, NaN, inf and Jinja's undefined values."""
    x = _defined(x)
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return none
    return fmt.format(x)


def _defined(x: Any) -> Any:
    from jinja2 import Undefined

    return None if isinstance(x, Undefined) else x


def _ms(x: Any) -> Any:
    x = _defined(x)
    return None if x is None else 1e3 * x


def _mbps(x: Any) -> Any:
    x = _defined(x)
    return None if x is None else x / 1e6


def _helpers(out_dir: Path) -> dict[str, Any]:
    def img(path: Any, alt: str) -> str:
        path = _defined(path)
        if not path:
            return ""
        p = Path(path)
        try:
            rel = p.relative_to(out_dir)
        except ValueError:
            rel = p
        return f"![{alt}]({rel.as_posix()})\n"

    def join_f(xs: Iterable[Any], fmt: str = "{:.2f}", sep: str = " / ") -> str:
        return sep.join(fmt_num(x, fmt) for x in xs)

    return {"f": fmt_num, "pct": lambda x: fmt_num(x, "{:+.2f} %"), "ms": _ms, "mbps": _mbps, "img": img, "join_f": join_f}


def render(template: str, out_dir: str | os.PathLike[str] = ".", **context: Any) -> str:
    """Render ``templates/<template>`` with ``context`` and the helpers above; images relative to ``out_dir``."""
    from jinja2 import Environment, PackageLoader

    env = Environment(loader=PackageLoader("scidmz.evaluation", "templates"), trim_blocks=True,
                      lstrip_blocks=True, keep_trailing_newline=True, autoescape=False)
    env.globals.update(_helpers(Path(out_dir)))
    return env.get_template(template).render(**context)


def write_report(text: str, out_dir: str | os.PathLike[str], name: str = "report.md") -> Path:
    """Write a rendered report atomically to ``out_dir/name``."""
    from ..fileio import atomic_write_text

    path = Path(out_dir) / name
    atomic_write_text(path, text)
    return path
