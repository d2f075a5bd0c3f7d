"""The allocation LPs' solver: scipy's bundled HiGHS called directly, as
`linprog(method="highs", options=LP_OPTIONS)` would call it (the same solutions, bit for
bit: tests), without linprog's per-call input checking; `linprog` itself where scipy's
private bindings are missing or have changed."""

from __future__ import annotations

import threading

import numpy as np

# HiGHS's presolve costs more than it saves on these small dense LPs (-28% time per solve on
# the 2869ce allocations, same optima)
LP_OPTIONS = {"presolve": False}


def _linprog():
    try:
        from scipy.optimize import linprog   # lazy: scipy stays off the light import path
    except ImportError:
        from gpucluster.errors import UserError
        raise UserError("the round-based (Gavel) policies solve LPs with scipy, which is not installed: "
                        "pip install 'gpucluster[sched]'", field="policy") from None
    return linprog


_HIGHS: list = []   # [core module, options] once loaded; [None] when unavailable
_LOCAL = threading.local()
_COLWISE, _MINIMIZE = 1, 1   # HiGHS's MatrixFormat.kColwise, ObjSense.kMinimize (checked at load)


def highs_core():
    """scipy's bundled HiGHS bindings (the solver linprog(method="highs") runs), with the
    options linprog passes: same solver, same options, hence the same vertex, without
    linprog's per-call input checking and option validation (~3 ms of a ~4 ms solve here).
    None where that private module is missing or has changed (linprog is used instead)."""
    if not _HIGHS:
        try:
            from scipy.optimize._highspy import _core as h   # private: guarded, falls back to linprog
            o = h.HighsOptions()
            o.presolve = "off" if not LP_OPTIONS.get("presolve", True) else "on"
            o.highs_debug_level = 0
            o.log_to_console = False
            o.output_flag = False
            o.simplex_strategy = int(h.simplex_constants.SimplexStrategy.kSimplexStrategyDual)
            _ = (h._Highs, h.HighsModelStatus.kOptimal)
            if int(h.MatrixFormat.kColwise) != _COLWISE or int(h.ObjSense.kMinimize) != _MINIMIZE:
                raise ValueError("HiGHS enums changed")
            _HIGHS[:] = [h, o]
            # min -x s.t. x <= 2, 0 <= x <= 5 through the calls solve_csc makes: x = 2
            if _solve_tiny() != 2.0:
                raise ValueError("HiGHS bindings changed")
        except Exception:   # noqa: BLE001 - any change in the private API: use linprog
            _HIGHS[:] = [None, None]
    return _HIGHS[0]


def _solve_tiny() -> float:
    x = solve_csc(np.array([-1.0]), np.array([0, 1], dtype=np.int32), np.array([0], dtype=np.int32), np.array([1.0]),
                  np.zeros(1), np.array([5.0]), np.array([2.0]))
    return float(x[0]) if x is not None else float("nan")


def _solver(h):
    """One HiGHS instance per thread, reused: passModel clears the previous model's solver state
    (same solutions as a fresh instance, a test), and making one costs ~0.1 ms a solve."""
    s = getattr(_LOCAL, "highs", None)
    if s is None:
        s = h._Highs()
        s.passOptions(_HIGHS[1])
        _LOCAL.highs = s
    return s


def solve_csc(cost: np.ndarray, start: np.ndarray, index: np.ndarray, value: np.ndarray, lower: np.ndarray,
              upper: np.ndarray, row_upper: np.ndarray) -> np.ndarray | None:
    """min cost.x s.t. A x <= row_upper, lower <= x <= upper, A given column-wise (start has
    n + 1 entries, rows sorted within a column, no explicit zeros), solved as `solve_lp` does."""
    n, m = len(cost), len(row_upper)
    h = highs_core()
    if h is None:
        from scipy.sparse import csc_array
        A = csc_array((value, index, start), shape=(m, n))
        res = _linprog()(cost, A_ub=A, b_ub=row_upper, bounds=np.column_stack([lower, upper]), method="highs",
                         options=LP_OPTIONS)
        return res.x if res.status == 0 else None
    highs = _solver(h)
    # the arrays overload of passModel (one call, where a HighsLp takes a dozen attribute copies);
    # all-continuous integrality: an LP, as HighsLp gives (same solutions, a test)
    highs.passModel(n, m, len(value), _COLWISE, _MINIMIZE, 0.0, cost, lower, upper, np.full(m, -np.inf), row_upper,
                    start, index, value, np.zeros(n, dtype=np.int32))
    highs.run()
    if highs.getModelStatus() != h.HighsModelStatus.kOptimal:
        return None
    return np.array(highs.getSolution().col_value)


def solve_lp(cost: np.ndarray, A_ub: np.ndarray, b_ub: np.ndarray, bounds: np.ndarray) -> np.ndarray | None:
    """min cost.x s.t. A_ub x <= b_ub, bounds[:, 0] <= x <= bounds[:, 1] (dense A_ub), with
    HiGHS's dual simplex and no presolve as `linprog(..., method="highs", options=LP_OPTIONS)`
    solves it: x at the optimum, None when not optimal."""
    if highs_core() is None:
        res = _linprog()(cost, A_ub=A_ub, b_ub=b_ub, bounds=bounds, method="highs", options=LP_OPTIONS)
        return res.x if res.status == 0 else None
    At = np.ascontiguousarray(A_ub.T)      # column-wise nonzeros, rows sorted: what csc_array gives linprog
    nz = At != 0
    start = np.concatenate([[0], np.cumsum(nz.sum(axis=1))]).astype(np.int32)
    return solve_csc(np.asarray(cost, dtype=float), start, np.nonzero(nz)[1].astype(np.int32), At[nz],
                     np.ascontiguousarray(bounds[:, 0], dtype=float), np.ascontiguousarray(bounds[:, 1], dtype=float),
                     np.asarray(b_ub, dtype=float))
