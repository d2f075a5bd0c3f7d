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
PriorityCalcPeriod / half-life (5 minutes / 7 days: 5e-4) of Slurm's, and exact however
long the simulator goes between two updates. A half-life of 0 disables decay.
"""

from __future__ import annotations

import math

from gpucluster.sim.jobs import RUNNING, Job


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


def decayed_usage(gpu_s: float, gpus: int, end: float, now: float, half_life_s: float) -> float:
    """`gpu_s` used by `gpus` GPUs up to `end`, as it counts at `now`:
    gpus x integral over [end - gpu_s/gpus, end] of 2^(-(now - s)/half-life) ds."""
    if half_life_s <= 0 or gpu_s <= 0:
        return gpu_s
    k = math.log(2) / half_life_s
    start = end - gpu_s / max(gpus, 1)
    return max(gpus, 1) * (math.exp(-k * (now - end)) - math.exp(-k * (now - start))) / k


class FairShare:
    """Decayed GPU-second usage per account, fed by the jobs the policy starts."""

    def __init__(self, shares: dict[str, float], half_life_s: float) -> None:
        self.shares = dict(shares)
        self.half_life_s = half_life_s
        self.usage: dict[str, float] = {a: 0.0 for a in self.shares}
        self.t = 0.0
        self._jobs: dict[int, tuple[Job, str, float]] = {}   # running job -> (job, account, GPU-s counted)

    def account_known(self, account: str) -> None:
        if account not in self.shares:
            self.shares[account] = 1.0   # Slurm's default Fairshare=1
            self.usage[account] = 0.0

    def started(self, job: Job, account: str) -> None:
        self.account_known(account)
        self._jobs[job.id] = (job, account, job.attained)

    def update(self, now: float) -> None:
        """Decay the usage to `now`, then add what the started jobs used since the last update,
        each GPU-second decayed from when it was used (the job's last GPU-seconds, run back to
        back up to its end or now)."""
        d = decay_factor(now - self.t, self.half_life_s)
        if d != 1.0:
            for a in self.usage:
                self.usage[a] *= d
        done = []
        for jid, (job, account, counted) in self._jobs.items():
            running = job.state == RUNNING
            total = job.attained + (job.gpus * (now - job.run_start) if running else 0.0)
            end = now if running or job.end is None else job.end
            self.usage[account] += decayed_usage(total - counted, job.gpus, end, now, self.half_life_s)
            if running:
                self._jobs[jid] = (job, account, total)
            else:
                done.append(jid)
        for jid in done:
            del self._jobs[jid]
        self.t = now

    def factors(self) -> dict[str, float]:
        total_shares = sum(self.shares.values())
        total_usage = sum(self.usage.values())
        out = {}
        for a, sh in self.shares.items():
            s = sh / total_shares if total_shares > 0 else 0.0
            u = self.usage[a] / total_usage if total_usage > 0 else 0.0
            out[a] = fairshare_factor(u, s)
        return out
