"""Cluster state: nodes, per-GPU free shares, and the GPU-time integrals.

Every GPU has a free share in thousandths (`gpu_free`, 1000 = whole GPU free), so
whole-GPU jobs and GPU-sharing pods (openb's `gpu_milli`) live in one array. A
whole-GPU allocation needs a GPU with 1000 free; `avail[n]` counts those on node n
when the node is up, powered on and not draining (0 otherwise), which is what the
placement code searches.

Three integrals are kept by three independent counters, updated in O(1) at each
change: allocated GPU-time (sum of held shares), idle GPU-time (free shares on up
nodes) and down GPU-time (GPUs of failed or repairing nodes). Their sum must equal
capacity x time (the conservation law the tests check), where capacity counts
powered-on nodes only (cloud-burst nodes join and leave).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

WHOLE = 1000  # thousandths of a GPU


@dataclass(frozen=True)
class NodeInfo:
    name: str
    pool: str
    gpu_type: str
    gpus: int
    leaf: int = 0              # leaf switch (rail group) the node hangs off
    cpu_milli: int = 0         # 0 = not modelled (no CPU constraint)
    mem_mib: int = 0           # 0 = not modelled
    cloud: bool = False        # a cloud-burst node: off until provisioned


class AllocationError(RuntimeError):
    """A decision that breaks the state's rules (a bug in a policy or the simulator)."""


class ClusterState:
    def __init__(self, nodes: list[NodeInfo]) -> None:
        if not nodes:
            raise ValueError("a cluster needs at least one node")
        self.nodes = nodes
        n = len(nodes)
        self.node_gpus = np.array([x.gpus for x in nodes], dtype=np.int64)
        self.first_gpu = np.concatenate(([0], np.cumsum(self.node_gpus)[:-1])).astype(np.int64)
        self.total_gpus = int(self.node_gpus.sum())
        self.gpu_node = np.repeat(np.arange(n), self.node_gpus)
        self.gpu_free = np.full(self.total_gpus, WHOLE, dtype=np.int64)
        self.types = sorted({x.gpu_type for x in nodes})
        self.type_index = {t: i for i, t in enumerate(self.types)}
        self.node_type = np.array([self.type_index[x.gpu_type] for x in nodes], dtype=np.int64)
        self.node_leaf = np.array([x.leaf for x in nodes], dtype=np.int64)
        self.leaf_size = int(np.bincount(self.node_leaf).max())   # nodes under the fullest leaf
        self.node_cloud = np.array([x.cloud for x in nodes], dtype=bool)
        self.pools = list(dict.fromkeys(x.pool for x in nodes))
        self.pool_types = list(dict.fromkeys(x.gpu_type for x in nodes))   # GPU types in pool order
        self.node_pool = np.array([self.pools.index(x.pool) for x in nodes], dtype=np.int64)
        # nodes under the fullest leaf of each node's pool: a gang of that pool's nodes needs
        # ceil(nodes / it) leaves (a pool of 8-NIC nodes fits fewer nodes under a leaf than 1-NIC ones)
        pool_leaf = np.zeros(len(self.pools), dtype=np.int64)
        np.maximum.at(pool_leaf, self.node_pool, np.bincount(self.node_leaf)[self.node_leaf])
        self.pool_leaf_size = pool_leaf[self.node_pool]
        self.cpu_cap = np.array([x.cpu_milli for x in nodes], dtype=np.int64)
        self.mem_cap = np.array([x.mem_mib for x in nodes], dtype=np.int64)
        self.cpu_free = self.cpu_cap.copy()
        self.mem_free = self.mem_cap.copy()
        self.node_whole = self.node_gpus.copy()          # GPUs with 1000 free, whatever the node's state
        self.node_on = ~self.node_cloud                   # cloud nodes start off
        self.node_up = np.ones(n, dtype=bool)             # not failed
        self.node_drain = np.zeros(n, dtype=bool)         # up but takes no new work
        self.usable = self.node_on.copy()                 # on, up and not draining
        self.avail = np.where(self.usable, self.node_whole, 0)
        self.node_jobs: list[set[int]] = [set() for _ in range(n)]
        # counters (thousandths of a GPU) and their time integrals (GPU-seconds)
        self.capacity = int(self.node_gpus[self.node_on].sum())
        self.alloc_milli = 0
        self.idle_milli = self.capacity * WHOLE
        self.down_gpus = 0
        self.t = 0.0
        self.alloc_gpu_s = 0.0
        self.cloud_alloc_milli = 0                       # part of alloc_milli on cloud-burst nodes
        self.cloud_alloc_gpu_s = 0.0
        self.cloud_capacity_gpu_s = 0.0
        self.idle_gpu_s = 0.0
        self.down_gpu_s = 0.0
        self.capacity_gpu_s = 0.0
        self.type_capacity = np.bincount(self.node_type, weights=self.node_gpus, minlength=len(self.types))
        self.version = 0  # bumped on every change (policies may cache against it)
        self._cloud_on = 0  # GPUs of powered-on cloud nodes

    # -- accounting -----------------------------------------------------------------
    def advance(self, now: float) -> None:
        dt = now - self.t
        if dt > 0:
            self.alloc_gpu_s += self.alloc_milli * dt / WHOLE
            self.idle_gpu_s += self.idle_milli * dt / WHOLE
            self.down_gpu_s += self.down_gpus * dt
            self.capacity_gpu_s += self.capacity * dt
            if self.cloud_alloc_milli or self._cloud_on:
                self.cloud_alloc_gpu_s += self.cloud_alloc_milli * dt / WHOLE
                self.cloud_capacity_gpu_s += self._cloud_on * dt
            self.t = now

    def _usable(self, node: int) -> bool:
        return bool(self.node_on[node] and self.node_up[node] and not self.node_drain[node])

    def _refresh(self, node: int) -> None:
        ok = self._usable(node)
        self.usable[node] = ok
        self.avail[node] = self.node_whole[node] if ok else 0
        self.version += 1

    # -- allocation -----------------------------------------------------------------
    def allocate(self, job_id: int, gpus: np.ndarray, milli: int, cpu: int = 0, mem: int = 0) -> None:
        """Give `milli` thousandths of each GPU in `gpus` to a job; raises AllocationError
        (and changes nothing) if any GPU is taken twice, lacks the share, or is not usable."""
        free = self.gpu_free[gpus]
        nodes = self.gpu_node[gpus]
        if len(np.unique(gpus)) != len(gpus):
            raise AllocationError(f"job {job_id}: the same GPU twice in one allocation")
        if milli >= WHOLE and np.any(free < WHOLE):
            raise AllocationError(f"job {job_id}: GPU already allocated")
        if np.any(free < milli):
            raise AllocationError(f"job {job_id}: GPU share exceeds what is free")
        for node in np.unique(nodes):
            if not self._usable(int(node)):
                raise AllocationError(f"job {job_id}: node {node} is not usable")
        if cpu or mem:
            node = int(nodes[0])
            if (self.cpu_cap[node] and self.cpu_free[node] < cpu) or (self.mem_cap[node] and self.mem_free[node] < mem):
                raise AllocationError(f"job {job_id}: not enough CPU or memory on node {node}")
            self.cpu_free[node] -= cpu
            self.mem_free[node] -= mem
        was_whole = free == WHOLE
        self.gpu_free[gpus] = free - milli
        np.subtract.at(self.node_whole, nodes[was_whole], 1)
        total = milli * len(gpus)
        self.alloc_milli += total
        self.idle_milli -= total
        if self._cloud_on:
            self.cloud_alloc_milli += milli * int(np.count_nonzero(self.node_cloud[nodes]))
        for node in set(nodes.tolist()):
            self.node_jobs[node].add(job_id)
            self._refresh(node)

    def release(self, job_id: int, gpus: np.ndarray, milli: int, cpu: int = 0, mem: int = 0) -> None:
        nodes = self.gpu_node[gpus]
        self.gpu_free[gpus] += milli
        if np.any(self.gpu_free[gpus] > WHOLE):
            raise AllocationError(f"job {job_id}: released more than it held")
        now_whole = self.gpu_free[gpus] == WHOLE
        np.add.at(self.node_whole, nodes[now_whole], 1)
        if cpu or mem:
            node = int(nodes[0])
            self.cpu_free[node] += cpu
            self.mem_free[node] += mem
        total = milli * len(gpus)
        self.alloc_milli -= total
        if self._cloud_on:
            self.cloud_alloc_milli -= milli * int(np.count_nonzero(self.node_cloud[nodes]))
        for node in set(nodes.tolist()):
            self.node_jobs[node].discard(job_id)
            if self.node_on[node] and self.node_up[node]:
                self.idle_milli += milli * int(np.count_nonzero(nodes == node))
            self._refresh(node)

    # -- node life ------------------------------------------------------------------
    def node_free_milli(self, node: int) -> int:
        a = self.first_gpu[node]
        return int(self.gpu_free[a:a + self.node_gpus[node]].sum())

    def fail(self, node: int) -> None:
        """Mark a node down; its jobs must have been released first."""
        if self.node_jobs[node]:
            raise AllocationError(f"node {node} fails with jobs still on it")
        if not self.node_up[node]:
            return
        if self.node_on[node]:
            self.idle_milli -= self.node_free_milli(node)
            self.down_gpus += int(self.node_gpus[node])
        self.node_up[node] = False
        self._refresh(node)

    def repair(self, node: int) -> None:
        if self.node_up[node]:
            return
        if self.node_on[node]:
            self.down_gpus -= int(self.node_gpus[node])
            self.idle_milli += self.node_free_milli(node)
        self.node_up[node] = True
        self._refresh(node)

    def power(self, node: int, on: bool) -> None:
        """Turn a cloud node on (it joins the capacity) or off (it must be empty)."""
        if bool(self.node_on[node]) == on:
            return
        g = int(self.node_gpus[node])
        if not on and self.node_jobs[node]:
            raise AllocationError(f"node {node} powered off with jobs on it")
        sign = 1 if on else -1
        self.capacity += sign * g
        if self.node_cloud[node]:
            self._cloud_on += sign * g
        if self.node_up[node]:
            self.idle_milli += sign * self.node_free_milli(node)
        else:
            self.down_gpus += sign * g
        self.node_on[node] = on
        self._refresh(node)

    # -- queries --------------------------------------------------------------------
    def check(self) -> None:
        """Internal consistency (used by tests): counters match the arrays."""
        whole = np.add.reduceat(self.gpu_free == WHOLE, self.first_gpu) if self.total_gpus else np.zeros(0)
        assert np.array_equal(whole, self.node_whole), "node_whole out of step"
        assert np.all(self.gpu_free >= 0) and np.all(self.gpu_free <= WHOLE)
        live = self.node_on & self.node_up
        on_gpu = np.repeat(live, self.node_gpus)
        assert self.idle_milli == int(self.gpu_free[on_gpu].sum()), "idle counter out of step"
        assert self.down_gpus == int(self.node_gpus[self.node_on & ~self.node_up].sum())
        assert self.capacity == int(self.node_gpus[self.node_on].sum())
        assert self.alloc_milli == int((WHOLE - self.gpu_free).sum())
