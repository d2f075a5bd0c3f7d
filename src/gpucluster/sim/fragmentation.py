"""GPU fragmentation as the ATC'23 paper defines it, and fragmentation gradient descent.

Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
Fragmentation Gradient Descent", USENIX ATC'23 (the openb trace's paper):
* For a task m and a node n, the fragment F_n(m) is the node's free GPU capacity
  that m cannot use: all of it when m cannot run on n at all (too few free GPUs,
  CPU or memory), else the free parts of GPUs too small for m (free < m's share
  for a GPU-sharing task; any partly used GPU for a whole-GPU task).
* Against a target workload M (task classes with popularity p_m),
  F_n(M) = sum_m p_m F_n(m); the cluster's fragmentation is sum_n F_n(M), and its
  fragmentation rate that sum over the free GPU capacity.
* FGD places each task where F_n(M) grows least (the steepest descent of the
  fragmentation gradient), choosing the node and the GPU.

Here the target workload is the scenario's own GPU jobs, grouped into classes by
(CPU, GPUs, GPU share, allowed GPU types), keeping the most popular classes that
hold 99% of them. A class that may only run on some GPU types (openb's `gpu_spec`)
cannot run on a node of another type: all of that node's free GPUs are its fragment.
Arithmetic is numpy over a (rows x GPUs per node) matrix of free shares.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from gpucluster.sim.state import WHOLE, ClusterState


class FragModel:
    def __init__(self, state: ClusterState, classes: list[tuple]) -> None:
        """classes: (cpu_milli, gpus, milli per GPU, popularity[, allowed GPU types or None]) with
        popularities summing to 1."""
        self.state = state
        self.width = int(state.node_gpus.max())
        self.cpu = np.array([c[0] for c in classes], dtype=np.int64)
        self.gpus = np.array([c[1] for c in classes], dtype=np.int64)
        self.milli = np.array([c[2] for c in classes], dtype=np.int64)
        self.p = np.array([c[3] for c in classes], dtype=float)
        # per class: a boolean per GPU type of the cluster it may use (None: any)
        self.type_ok: list[np.ndarray | None] = []
        for c in classes:
            types = c[4] if len(c) > 4 else None
            if types is None:
                self.type_ok.append(None)
            else:
                ok = np.zeros(len(state.types), dtype=bool)
                for t in types:
                    if t in state.type_index:
                        ok[state.type_index[t]] = True
                self.type_ok.append(ok)
        self.typed = any(t is not None for t in self.type_ok)
        # GPU index matrix per node, padded with -1
        idx = np.full((len(state.nodes), self.width), -1, dtype=np.int64)
        for n in range(len(state.nodes)):
            a, g = int(state.first_gpu[n]), int(state.node_gpus[n])
            idx[n, :g] = np.arange(a, a + g)
        self.idx = idx

    @classmethod
    def from_jobs(cls, state: ClusterState, jobs, coverage: float = 0.99, max_classes: int = 60) -> FragModel:
        def types(j) -> frozenset | None:
            t = getattr(j, "types", None)
            return None if t is None or set(state.types) <= set(t) else frozenset(t)
        count = Counter((j.cpu_milli, j.gpus, j.milli, types(j)) for j in jobs if j.gpus > 0 and j.milli > 0)
        if not count:
            count = Counter({(0, 1, WHOLE, None): 1})
        total = sum(count.values())
        kept, mass = [], 0
        for k, v in count.most_common(max_classes):
            kept.append((k, v))
            mass += v
            if mass >= coverage * total:
                break
        return cls(state, [(c, g, m, v / mass, t) for (c, g, m, t), v in kept])

    def rows(self, gpu_free: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        """Free shares of the nodes' GPUs as a matrix (padding 0)."""
        ix = self.idx[nodes]
        return np.where(ix >= 0, gpu_free[np.maximum(ix, 0)], 0)

    def frag(self, free: np.ndarray, cpu: np.ndarray, cpu_cap: np.ndarray,
             ntype: np.ndarray | None = None) -> np.ndarray:
        """F_n(M) for each row: free (R x W) shares, cpu free per row (cap 0 = not modelled), the
        rows' GPU type index (needed when classes are limited to some types).
        F does not depend on the order of a node's GPUs, so equal rows (sorted) are computed once."""
        if not self.typed or ntype is None:
            ntype = np.zeros(len(free), dtype=np.int64)
        if len(free) > 64:
            key = np.column_stack((np.sort(free, axis=1), cpu, cpu_cap, ntype))
            uniq, inv = np.unique(key, axis=0, return_inverse=True)
            w = free.shape[1]
            return self._frag(uniq[:, :w], uniq[:, w], uniq[:, w + 1], uniq[:, w + 2])[inv.ravel()]
        return self._frag(free, cpu, cpu_cap, ntype)

    def _frag(self, free: np.ndarray, cpu: np.ndarray, cpu_cap: np.ndarray, ntype: np.ndarray) -> np.ndarray:
        total = free.sum(axis=1).astype(float)
        out = np.zeros(len(free))
        whole = (free == WHOLE).sum(axis=1)
        partial = np.where(free < WHOLE, free, 0).sum(axis=1)
        for c, g, m, p, tok in zip(self.cpu, self.gpus, self.milli, self.p, self.type_ok, strict=True):
            cpu_ok = (cpu_cap == 0) | (cpu >= c)
            if tok is not None and self.typed:
                cpu_ok = cpu_ok & tok[ntype]      # a node of another GPU type: the task cannot run there
            if m < WHOLE:
                fits = cpu_ok & (free >= m).any(axis=1)
                small = np.where(free < m, free, 0).sum(axis=1)
            else:
                fits = cpu_ok & (whole >= g)
                small = partial
            out += p * np.where(fits, small, total)
        return out / WHOLE

    def cluster(self, gpu_free: np.ndarray, cpu_free: np.ndarray, usable: np.ndarray) -> tuple[float, float]:
        """(fragmented GPUs, free GPUs) over usable nodes."""
        nodes = np.flatnonzero(usable)
        free = self.rows(gpu_free, nodes)
        f = self.frag(free, cpu_free[nodes], self.state.cpu_cap[nodes], self.state.node_type[nodes])
        return float(f.sum()), float(free.sum() / WHOLE)

    def best_gpu(self, scr, cand: np.ndarray, milli: int, cpu: int) -> int:
        """The candidate GPU whose share placement raises its node's F_n(M) least."""
        st = self.state
        gfree = scr.gpu_free
        nodes = st.gpu_node[cand]
        # one candidate per (node, free value): equal GPUs on a node give equal outcomes
        key = nodes * (WHOLE + 1) + gfree[cand]
        _, first = np.unique(key, return_index=True)
        cand, nodes = cand[first], nodes[first]
        before_rows = self.rows(gfree, nodes)
        pos = cand - st.first_gpu[nodes]
        after_rows = before_rows.copy()
        after_rows[np.arange(len(cand)), pos] -= milli
        cpu_now = scr.cpu_free[nodes]
        cap = st.cpu_cap[nodes]
        nt = st.node_type[nodes]
        delta = self.frag(after_rows, cpu_now - cpu, cap, nt) - self.frag(before_rows, cpu_now, cap, nt)
        best = np.flatnonzero(delta <= delta.min() + 1e-12)
        return int(cand[best[np.argmin(cand[best])]])

    def best_node(self, scr, cand_nodes: np.ndarray, gpus: int, cpu: int) -> int:
        """The candidate node whose taking `gpus` whole GPUs raises F_n(M) least."""
        gfree = scr.gpu_free
        before = self.rows(gfree, cand_nodes)
        after = before.copy()
        # take the first `gpus` fully free GPUs of each row
        whole = after == WHOLE
        rank = np.cumsum(whole, axis=1)
        after[whole & (rank <= gpus)] = 0
        cpu_now = scr.cpu_free[cand_nodes]
        cap = self.state.cpu_cap[cand_nodes]
        nt = self.state.node_type[cand_nodes]
        delta = self.frag(after, cpu_now - cpu, cap, nt) - self.frag(before, cpu_now, cap, nt)
        return int(cand_nodes[np.argmin(delta)])
