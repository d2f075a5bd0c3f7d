"""Slurm's classic fair-share, per account (https://slurm.schedmd.com/priority_multifactor.html,
"Fair-share Factor" with PriorityFlags=NO_FAIR_TREE, on a flat tree: accounts under root).

    F = 2 ** (-U / S)

S is the account's normalized shares (its shares over the sum of all accounts' shares;
Slurm's default Fairshare=1 gives every account the same), U its normalized usage (its
decayed usage over all accounts' decayed usage). Usage is GPU-seconds, Slurm's usage
with TRESBillingWeights="GRES/gpu=1".

Decay: Slurm's documented usage is U = u(this period) + D u(last period) + D^2 u(the one
before) + ..., D = 2 ** (-PriorityCalcPeriod / PriorityDecayHalfLife), its decay thread
applying D every PriorityCalcPeriod (5 minutes). Here each GPU-second used at time s counts
2 ** (-(now - s) / half-life) at `now`: the same sum with periods shrunk to zero, within
PriorityCalcPeriod / half-life (5 minutes / 7 days: 5e-4) of Slurm's. Starts and stops come
from the simulator's hooks at the instant they happen. A half-life of 0 disables decay.
"""

from __future__ import annotations

import math



def fairshare_factor(usage_norm: float, shares_norm: float) -> float:
    """Slurm's classic factor 2^(-U/S); an account with no shares gets 0."""
    if shares_norm <= 0:
        return 0.0
    return 2.0 ** (-usage_norm / shares_norm)


def decay_factor(dt_s: float, half_life_s: float) -> float:
    """What is left of usage after dt_s (1 when decay is disabled)."""
    if half_life_s <= 0:
        return 1.0
    return 2.0 ** (-dt_s / half_life_s)


def decayed_integral(dt_s: float, half_life_s: float) -> float:
    """What one GPU busy for the last dt_s counts now: integral of 2^(-(dt - s)/H) over [0, dt]."""
    if half_life_s <= 0:
        return dt_s
    return half_life_s / math.log(2) * (1.0 - 2.0 ** (-dt_s / half_life_s))


class FairShare:
    """Decayed GPU-second usage per account. Each account's usage is advanced lazily: its GPUs in
    use are constant between two job starts or stops, so usage(t) = usage(t0) x decay(t - t0) +
    GPUs x decayed_integral(t - t0), exact, O(1) per start, stop and look-up."""

    def __init__(self, shares: dict[str, float], half_life_s: float) -> None:
        self.shares = dict(shares)
        self.half_life_s = half_life_s
        self.usage: dict[str, float] = {a: 0.0 for a in self.shares}
        self.gpus: dict[str, float] = {a: 0.0 for a in self.shares}   # in use now
        self.t: dict[str, float] = {a: 0.0 for a in self.shares}      # usage is valued at this time

    def account_known(self, account: str) -> None:
        if account not in self.shares:
            self.shares[account] = 1.0   # Slurm's default Fairshare=1
            self.usage[account] = self.gpus[account] = self.t[account] = 0.0

    def advance(self, account: str, now: float) -> None:
        dt = now - self.t[account]
        if dt > 0:
            self.usage[account] = (self.usage[account] * decay_factor(dt, self.half_life_s)
                                   + self.gpus[account] * decayed_integral(dt, self.half_life_s))
            self.t[account] = now

    def on_start(self, account: str, gpus: float, now: float) -> None:
        self.account_known(account)
        self.advance(account, now)
        self.gpus[account] += gpus

    def on_stop(self, account: str, gpus: float, now: float) -> None:
        self.advance(account, now)
        self.gpus[account] = max(0.0, self.gpus[account] - gpus)

    def factors(self, now: float) -> dict[str, float]:
        for a in self.usage:
            self.advance(a, now)
        total_shares = sum(self.shares.values())
        total_usage = sum(self.usage.values())
        out = {}
        for a, sh in self.shares.items():
            s = sh / total_shares if total_shares > 0 else 0.0
            u = self.usage[a] / total_usage if total_usage > 0 else 0.0
            out[a] = fairshare_factor(u, s)
        return out
