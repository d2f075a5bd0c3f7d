"""The ATC'23 fill experiment on an openb cluster: tasks arrive and stay until the cluster is full.

Weng et al., "Beware of Fragmentation" (USENIX ATC'23), evaluate placement
policies by submitting tasks drawn from a pod list one after another, without
departures, until the GPUs requested ("arrived workload") reach 130% of the
cluster's; a task that fits nowhere fails. At each arrived level they report the
GPU allocation rate and the fragmentation of the free GPUs (fragmentation.py).

Every policy sees the same candidates: usable nodes of a GPU type the task may use
(its `gpu_spec`), with the CPU and memory it asks for, and a GPU with the share it
needs (or enough whole free GPUs). They differ in the choice, as the paper's
baselines are described (our implementations, not the paper's code):
* `best-fit`: a share on the GPU with the least free part that fits; whole GPUs
  on the fullest node that fits; a CPU-only pod on the node with the least free CPU.
* `fgd`: where the fragmentation of the target workload grows least.
* `dot-product` (Tetris): the node whose free (GPU, CPU, memory) vector, as
  fractions of its capacity, is most aligned with the task's demand vector.
* `packing`: partly used GPUs first, then free GPUs on partly used nodes (fullest
  first), then idle nodes.
* `clustering`: the node already running the most tasks of the same shape
  (GPUs, share), best fit among ties.
* `random`: any candidate node, uniformly.
Inside a chosen node a share goes to the GPU with the least free part that fits,
whole GPUs to the node's first free ones.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from gpucluster.sim.fragmentation import FragModel
from gpucluster.sim.placement import Scratch, _fits_cpu, _gpus_on, place_share, place_whole
from gpucluster.sim.state import WHOLE, ClusterState

POLICIES = ("random", "dot-product", "clustering", "packing", "best-fit", "fgd")
LEVELS = (0.5, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3)


class Filler:
    def __init__(self, policy: str, state: ClusterState, frag: FragModel, seed: int) -> None:
        if policy not in POLICIES:
            from gpucluster.errors import UserError
            raise UserError(f"unknown fill policy {policy!r} (valid: {', '.join(POLICIES)})", field="--policies")
        self.policy, self.st, self.frag = policy, state, frag
        self.scr = Scratch(state)
        self.rng = np.random.default_rng(seed)
        self.masks: dict[frozenset | None, np.ndarray | None] = {}
        self.same: dict[tuple[int, int], np.ndarray] = defaultdict(lambda: np.zeros(len(state.nodes), np.int64))
        self.gpu_used_nodes = np.zeros(len(state.nodes), dtype=bool)

    def mask(self, types) -> np.ndarray | None:
        """Nodes of the GPU types a task may use (None: any)."""
        key = frozenset(types) if types else None
        if key not in self.masks:
            st = self.st
            self.masks[key] = None if key is None else np.isin(
                st.node_type, [st.type_index[t] for t in key if t in st.type_index])
        return self.masks[key]

    def place(self, gpus: int, milli: int, cpu: int, mem: int, types) -> bool:
        """Place one task; False when it fits nowhere."""
        scr, st = self.scr, self.st
        mask = self.mask(types)
        if gpus == 0:
            node = self._cpu_node(cpu, mem, mask)
            if node is None:
                return False
            scr.cpu_free[node] -= cpu
            scr.mem_free[node] -= mem
            return True
        p = self.policy
        if p in ("best-fit", "fgd"):
            use = self.frag if p == "fgd" else None
            if milli < WHOLE:
                g = place_share(scr, milli, mask, cpu, mem, "fgd" if use else "best-fit", use)
            else:
                g = place_whole(scr, gpus, mask, "fgd" if use else "pack", cpu, mem, use)
        else:
            g = self._baseline(gpus, milli, cpu, mem, mask)
        if g is None:
            return False
        scr.take(g, milli, cpu, mem)
        node = int(st.gpu_node[g[0]])
        self.same[(gpus, milli)][node] += 1
        self.gpu_used_nodes[np.unique(st.gpu_node[g])] = True
        return True

    def _cpu_node(self, cpu: int, mem: int, mask) -> int | None:
        scr = self.scr
        ok = scr.usable & (scr.cpu_free >= cpu) & (scr.mem_free >= mem)
        if mask is not None:
            ok &= mask
        cand = np.flatnonzero(ok)
        if not cand.size:
            return None
        if self.policy == "fgd":
            return self.frag.best_node(scr, cand, 0, cpu)
        if self.policy == "random":
            return int(cand[self.rng.integers(cand.size)])
        return int(cand[np.argmin(scr.cpu_free[cand])])

    def _baseline(self, gpus: int, milli: int, cpu: int, mem: int, mask) -> np.ndarray | None:
        scr, st = self.scr, self.st
        ok = scr.usable & _fits_cpu(scr, cpu, mem)
        if mask is not None:
            ok &= mask
        free = scr.gpu_free
        if milli < WHOLE:
            best_share = np.full(len(st.nodes), WHOLE + 1, dtype=np.int64)   # per node: least free part that fits
            fits = (free >= milli) & ok[st.gpu_node]
            idx = np.flatnonzero(fits)
            if not idx.size:
                return None
            np.minimum.at(best_share, st.gpu_node[idx], free[idx])
            cand = np.flatnonzero(best_share <= WHOLE)
        else:
            if gpus > int(st.node_gpus.max()):   # a gang larger than any node: spread as best fit does
                return place_whole(scr, gpus, mask, "pack", cpu, mem)
            cand = np.flatnonzero(ok & (scr.avail >= gpus))
            if not cand.size:
                return None
        node = self._choose(cand, gpus, milli, cpu, mem)
        if milli < WHOLE:
            a = int(st.first_gpu[node])
            on = free[a:a + int(st.node_gpus[node])]
            ids = np.flatnonzero(on >= milli)
            return np.array([a + int(ids[np.argmin(on[ids])])], dtype=np.int64)
        return _gpus_on(scr, [(node, gpus)])

    def _choose(self, cand: np.ndarray, gpus: int, milli: int, cpu: int, mem: int) -> int:
        scr, st, p = self.scr, self.st, self.policy
        if p == "random":
            return int(cand[self.rng.integers(cand.size)])
        per = st.node_gpus[cand]
        free_gpu = self._node_free(cand)                       # GPUs (fractional) free per candidate
        if p == "dot-product":
            demand = gpus * milli / WHOLE
            score = (demand / per) * (free_gpu / per)
            cap_cpu, cap_mem = st.cpu_cap[cand], st.mem_cap[cand]
            if cpu:
                score = score + np.where(cap_cpu > 0, (cpu / np.maximum(cap_cpu, 1))
                                         * (scr.cpu_free[cand] / np.maximum(cap_cpu, 1)), 0.0)
            if mem:
                score = score + np.where(cap_mem > 0, (mem / np.maximum(cap_mem, 1))
                                         * (scr.mem_free[cand] / np.maximum(cap_mem, 1)), 0.0)
            return int(cand[np.argmax(score)])
        if p == "packing":
            if milli < WHOLE:   # a partly used GPU that fits, else a node already in use, else an idle node
                partly = self._has_partial_fit(cand, milli)
                if partly.any():
                    sub = cand[partly]
                    return int(sub[np.argmin(self._node_free(sub))])
            used = self.gpu_used_nodes[cand] & (free_gpu < per)
            pool = cand[used] if used.any() else cand
            return int(pool[np.argmin(self._node_free(pool))])
        # clustering: most tasks of the same shape already there, then best fit
        same = self.same[(gpus, milli)][cand]
        top = cand[same == same.max()]
        return int(top[np.argmin(self._node_free(top))])

    def _node_free(self, nodes: np.ndarray) -> np.ndarray:
        free = self.frag.rows(self.scr.gpu_free, nodes)
        return free.sum(axis=1) / WHOLE

    def _has_partial_fit(self, nodes: np.ndarray, milli: int) -> np.ndarray:
        free = self.frag.rows(self.scr.gpu_free, nodes)
        return np.asarray(((free >= milli) & (free < WHOLE)).any(axis=1))


def fill(policy: str, state: ClusterState, pods, frag: FragModel, seed: int,
         levels: tuple[float, ...] = LEVELS) -> list[dict]:
    """Submit pods drawn with replacement until each arrived level; the measurements at each level.
    `pods` have gpus, milli, cpu_milli, mem_mib and gpu_types (None: any)."""
    f = Filler(policy, state, frag, seed)
    scr = f.scr
    rng = np.random.default_rng(seed)
    total = state.total_gpus
    arrived = failed = placed = failed_gpus = 0.0
    out, todo = [], list(levels)
    while todo:
        p = pods[int(rng.integers(len(pods)))]
        demand = p.gpus * (p.milli / WHOLE if p.gpus == 1 else 1.0)
        arrived += demand
        if f.place(p.gpus, p.milli if p.gpus else 0, p.cpu_milli, p.mem_mib, p.gpu_types):
            placed += 1
        else:
            failed += 1
            failed_gpus += demand
        while todo and arrived >= todo[0] * total:
            alloc = (total * WHOLE - scr.gpu_free.sum()) / WHOLE
            fgpus, free = frag.cluster(scr.gpu_free, scr.cpu_free, scr.usable)
            out.append({"arrived": todo.pop(0), "allocation": alloc / total, "unallocated": 1 - alloc / total,
                        "frag_of_free": fgpus / free if free else 0.0, "frag_of_total": fgpus / total,
                        "failed_tasks": failed, "failed_gpus": failed_gpus, "placed_tasks": placed})
    return out
