"""The layout of nccl-tests' *_perf output, shared by `comm` (expected) and `bench collective`
(measured), so that either can be diffed with a real nccl-tests run.

A measured row fills the half it was measured as (`placement`) and the in-place half from its
`in_place` measurement; a half that was not measured prints `-`, never the other half's
figures. A model row (no `placement`) is the same prediction for both halves."""

from __future__ import annotations

from collections.abc import Sequence

DASH = f"{'-':>8} {'-':>7} {'-':>7} {'-':>6}"


def _half(fig: dict | None) -> str:
    if not fig:
        return DASH
    return f"{_t(fig['time_us']):>8} {fig['algbw_gbps']:7.2f} {fig['busbw_gbps']:7.2f} {int(fig['wrong']):6d}"


def halves(r: dict) -> tuple[dict | None, dict | None]:
    """(out-of-place, in-place) figures of a row; None where not measured."""
    placement = r.get("placement")
    if placement is None:                       # the model: one prediction for both
        return r, r
    if placement == "in-place":
        return None, r
    return r, r.get("in_place")


def print_nccl_table(header: list[str], rows: list[dict], avg: float, footer: Sequence[str] = ()) -> None:
    from gpucluster.cli.safe_text import plain

    out = print  # plain print: rich would wrap the fixed-width table on narrow terminals
    out(f"# {plain(header[0])}")
    for line in header[1:]:
        out(f"#  {plain(line)}")
    out("#")
    out("#                                                              out-of-place                       in-place")
    out("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong")
    out("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)")
    bad = 0
    for r in rows:
        oop, inp = halves(r)
        bad += bool((oop or {}).get("wrong") or (inp or {}).get("wrong"))
        out(plain(f"{r['size_bytes']:>12} {r['count']:>13} {r['type']:>9} {r['redop']:>7} {r['root']:>7} "
                  f"{_half(oop)} {_half(inp)}"))
    out(f"# Out of bounds values : {bad} {'OK' if not bad else 'FAILED'}")
    out(f"# Avg bus bandwidth    : {avg:.4g} ")
    out("#")
    for line in footer:
        out(f"# {plain(line)}")


def algorithm_changes(rows: list[dict]) -> list[str]:
    """'from SIZE: algorithm X, limited by Y' wherever the model's choice changes."""
    from gpucluster.units import format_bytes

    changes: list[tuple[float, tuple[str, str]]] = []
    for r in rows:
        key = (r["algorithm"], r["bottleneck"])
        if not changes or changes[-1][1] != key:
            changes.append((r["size_bytes"], key))
    return [f"from {format_bytes(size):>8}: algorithm {algorithm}, limited by {neck}"
            for size, (algorithm, neck) in changes]


def _t(us: float) -> str:
    return f"{us:.2f}" if us < 1e4 else f"{us:.1f}" if us < 1e6 else f"{us:.0f}"
