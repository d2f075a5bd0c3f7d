"""Where a job's GPUs go: whole-GPU gangs and GPU-sharing pods.

Placement works on a `Scratch`, a tentative copy of the free resources for one
scheduling pass, so a policy can place several jobs (or free a victim's GPUs)
before the simulator applies anything. Each search is a few numpy passes over the
nodes (O(nodes)); no Python loop over GPUs except inside the chosen nodes.

Strategies for whole GPUs:
* `pack`: one node by best fit (the fullest node that still fits) when the job fits
  in a node; else the fewest nodes, most free first, lowest index on ties
  (Slurm's cons_tres without the topology plugin behaves much like this).
* `topology`: the same inside one leaf switch when some leaf can hold the gang
  (the leaf with the least room that fits: best fit), else the fewest leaves,
  fullest first (Slurm's topology/tree plugin, Kubernetes topology-aware gangs).
* `fgd`: a gang that fits in one node goes where the fragmentation grows least
  (see sim/fragmentation.py); larger gangs as `pack`.
Shares of one GPU (milli < 1000): `best-fit` (the GPU with the least free share
that fits) or `fgd` (fragmentation gradient descent).
"""

from __future__ import annotations

import numpy as np

from gpucluster.sim.state import WHOLE, ClusterState


class Scratch:
    """Free resources during one pass; copies the state's arrays on first write."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.avail = state.avail.copy()
        self._gpu_free: np.ndarray | None = None
        self._cpu: np.ndarray | None = None
        self._mem: np.ndarray | None = None
        self.usable = state.usable

    @property
    def gpu_free(self) -> np.ndarray:
        if self._gpu_free is None:
            self._gpu_free = self.state.gpu_free.copy()
        return self._gpu_free

    @property
    def cpu_free(self) -> np.ndarray:
        if self._cpu is None:
            self._cpu = self.state.cpu_free.copy()
        return self._cpu

    @property
    def mem_free(self) -> np.ndarray:
        if self._mem is None:
            self._mem = self.state.mem_free.copy()
        return self._mem

    def take(self, gpus: np.ndarray, milli: int, cpu: int = 0, mem: int = 0) -> None:
        st = self.state
        free = self.gpu_free
        nodes = st.gpu_node[gpus]
        was_whole = free[gpus] == WHOLE
        free[gpus] -= milli
        np.subtract.at(self.avail, nodes[was_whole], 1)
        if cpu or mem:
            self.cpu_free[nodes[0]] -= cpu
            self.mem_free[nodes[0]] -= mem

    def give(self, gpus: np.ndarray, milli: int, cpu: int = 0, mem: int = 0) -> None:
        """Return a (victim's) GPUs to the pass, as a preemption would."""
        st = self.state
        free = self.gpu_free
        nodes = st.gpu_node[gpus]
        free[gpus] += milli
        whole = (free[gpus] == WHOLE) & self.usable[nodes]
        np.add.at(self.avail, nodes[whole], 1)
        if cpu or mem:
            self.cpu_free[nodes[0]] += cpu
            self.mem_free[nodes[0]] += mem


def free_whole(scr: Scratch, mask: np.ndarray | None) -> int:
    return int(scr.avail.sum() if mask is None else scr.avail[mask].sum())


def place_whole(scr: Scratch, gpus: int, mask: np.ndarray | None = None, strategy: str = "pack",
                cpu: int = 0, mem: int = 0, frag=None) -> np.ndarray | None:
    """GPU ids for a gang of `gpus` whole GPUs on nodes in `mask`, or None if it does not fit now."""
    st = scr.state
    avail = scr.avail if mask is None else np.where(mask, scr.avail, 0)
    if cpu or mem:
        avail = np.where(_fits_cpu(scr, cpu, mem), avail, 0)
    if gpus <= 0 or int(avail.sum()) < gpus:
        return None
    sizes = st.node_gpus if mask is None else st.node_gpus[mask]
    if gpus <= int(sizes.max()):
        # a gang that fits in one node never spreads: best fit (fullest node with room, lowest index)
        fits_one = np.flatnonzero(avail >= gpus)
        if not fits_one.size:
            return None
        if strategy == "fgd" and frag is not None:
            return _gpus_on(scr, [(frag.best_node(scr, fits_one, gpus, cpu), gpus)])
        return _gpus_on(scr, [(int(fits_one[np.argmin(avail[fits_one])]), gpus)])
    if strategy == "topology":
        order = _leaf_order(st, avail, gpus)
    else:
        cand = np.flatnonzero(avail)
        order = cand[np.lexsort((cand, -avail[cand]))]
    picks = []
    need = gpus
    for node in order.tolist():
        take = min(need, int(avail[node]))
        picks.append((node, take))
        need -= take
        if need == 0:
            return _gpus_on(scr, picks)
    return None


def _leaf_order(st: ClusterState, avail: np.ndarray, gpus: int) -> np.ndarray:
    leaves = st.node_leaf
    per_leaf = np.bincount(leaves, weights=avail, minlength=int(leaves.max()) + 1)
    enough = np.flatnonzero(per_leaf >= gpus)
    if enough.size:
        leaf_rank = np.full(per_leaf.size, 2, dtype=np.int64)
        leaf_rank[int(enough[np.argmin(per_leaf[enough])])] = 0
        key_leaf = leaf_rank
    else:
        key_leaf = np.argsort(np.argsort(-per_leaf, kind="stable"), kind="stable")
    cand = np.flatnonzero(avail)
    return cand[np.lexsort((cand, -avail[cand], key_leaf[leaves[cand]]))]


def _gpus_on(scr: Scratch, picks: list[tuple[int, int]]) -> np.ndarray:
    st = scr.state
    free = scr._gpu_free if scr._gpu_free is not None else st.gpu_free
    out = []
    for node, count in picks:
        a = int(st.first_gpu[node])
        idx = np.flatnonzero(free[a:a + int(st.node_gpus[node])] == WHOLE)[:count]
        out.append(idx + a)
    return np.concatenate(out) if len(out) > 1 else out[0]


def _fits_cpu(scr: Scratch, cpu: int, mem: int) -> np.ndarray:
    st = scr.state
    ok = np.ones(len(st.nodes), dtype=bool)
    if cpu:
        ok &= (st.cpu_cap == 0) | (scr.cpu_free >= cpu)
    if mem:
        ok &= (st.mem_cap == 0) | (scr.mem_free >= mem)
    return ok


def share_candidates(scr: Scratch, milli: int, mask: np.ndarray | None, cpu: int = 0,
                     mem: int = 0) -> np.ndarray:
    """GPU ids with at least `milli` free on usable nodes that also have the CPU and memory."""
    st = scr.state
    node_ok = scr.usable if mask is None else scr.usable & mask
    if cpu or mem:
        node_ok = node_ok & _fits_cpu(scr, cpu, mem)
    return np.flatnonzero((scr.gpu_free >= milli) & node_ok[st.gpu_node])


def place_share(scr: Scratch, milli: int, mask: np.ndarray | None = None, cpu: int = 0, mem: int = 0,
                strategy: str = "best-fit", frag=None) -> np.ndarray | None:
    """One GPU id for a pod that needs `milli` thousandths of a GPU, or None."""
    cand = share_candidates(scr, milli, mask, cpu, mem)
    if not cand.size:
        return None
    if strategy == "fgd" and frag is not None:
        g = frag.best_gpu(scr, cand, milli, cpu)
    else:
        g = int(cand[np.argmin(scr.gpu_free[cand])])
    return np.array([g], dtype=np.int64)


def leaves_used(st: ClusterState, gpus: np.ndarray) -> tuple[int, int]:
    """(leaves a gang spans, the fewest it could span given its node count and leaf size)."""
    nodes = np.unique(st.gpu_node[gpus])
    if nodes.size == 1:
        return 1, 1
    used = int(np.unique(st.node_leaf[nodes]).size)
    return used, max(1, -(-nodes.size // int(st.pool_leaf_size[nodes].max())))
