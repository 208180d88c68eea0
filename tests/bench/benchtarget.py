"""Benchmark targets for the Python benchmarks (the C++ ones use common/include/elastic/common/bench_target.h,
with the same JSON form and the same switch).

A benchmark checks each figure it promises against its stated target (docs/results.md, "Benchmark targets"),
adds the checks to its JSON line ("targets": one object per check, "met": all met) and ends through finish(),
which exits 1 with one line naming every missed target.

ELASTIC_BENCH_TIGHTEN=F (a number >= 1; unset: 1) tightens every target by F, to prove that the benchmark
fails when it misses: "<" and "<=" limits are divided by F, ">" and ">=" limits multiplied. F < 1 is refused.
"""

import math
import os
import sys

TIGHTEN_VARIABLE = "ELASTIC_BENCH_TIGHTEN"
_UPPER = ("<", "<=")
_BOUNDS = ("<", "<=", ">=", ">")


def tighten_factor():
    """ELASTIC_BENCH_TIGHTEN as a float (1 when unset or empty); exits 2 naming it when it is not >= 1."""
    text = os.environ.get(TIGHTEN_VARIABLE, "")
    if not text:
        return 1.0
    try:
        factor = float(text)
    except ValueError:
        factor = float("nan")
    if not math.isfinite(factor) or factor < 1:
        print(f"{TIGHTEN_VARIABLE}='{text}' is not a number >= 1 (it tightens every target by that factor; "
              "unset it for the stated targets)", file=sys.stderr)
        sys.exit(2)
    return factor


def check(name, measured, bound, stated, factor=None):
    """One target check: {"name", "measured" (None: not measured, a miss), "bound", "stated", "limit", "met"}."""
    if bound not in _BOUNDS:
        raise ValueError(f"bound {bound!r} is not one of {_BOUNDS}")
    if factor is None:
        factor = tighten_factor()
    limit = stated / factor if bound in _UPPER else stated * factor
    if measured is None or (isinstance(measured, float) and math.isnan(measured)):
        met = False
        measured = None
    else:
        met = {"<": measured < limit, "<=": measured <= limit, ">=": measured >= limit, ">": measured > limit}[bound]
    return {"name": name, "measured": measured, "bound": bound, "stated": stated, "limit": limit, "met": bool(met)}


def add_checks(line, checks, factor=None):
    """Adds "targets", "met" (and "tighten" when the factor is not 1) to a benchmark's JSON line; returns it."""
    if factor is None:
        factor = tighten_factor()
    line["targets"] = list(checks)
    line["met"] = all(c["met"] for c in checks)
    if factor != 1:
        line["tighten"] = factor
    return line


def missed(checks):
    """The missed checks in one line ("" when all were met): "ratio 5.25 (target >= 10); ..."."""
    parts = []
    for c in checks:
        if not c["met"]:
            figure = "not measured" if c["measured"] is None else f"{c['measured']:.6g}"
            parts.append(f"{c['name']} {figure} (target {c['bound']} {c['limit']:.6g})")
    return "; ".join(parts)


def finish(bench, checks, what=""):
    """Exits 1 with one line naming every missed target of `bench`; returns when all were met."""
    text = missed(checks)
    if text:
        sys.exit(f"{bench}: missed target: {text}" + (f" ({what})" if what else ""))
