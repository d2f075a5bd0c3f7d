"""Slurm partitions as `scontrol show partition -o` prints them (one line per partition):

    PartitionName=debug ... Nodes=gpu[01-02] PriorityJobFactor=10 PriorityTier=2 ... State=UP ...

What the replay twin keeps of each: its node set (`Nodes`, a hostlist; `ALL` is every node),
PriorityTier (Slurm's default 1) and PriorityJobFactor (default 1). A line that cannot be read
(no PartitionName, a word that is not KEY=VALUE, a tier or factor that is not a whole number,
Nodes that is not a hostlist, a partition named twice) is skipped and counted by reason with the
first line it was seen on, like the sacct reader's bad rows; a partition without nodes
(`Nodes=(null)`) is counted apart: no job can run in it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpucluster.errors import UserError
from gpucluster.sim.traces import BadLines
from gpucluster.specs.hostlist import compress, expand

_NO_NODES = ("", "(null)")


@dataclass
class SlurmPartition:
    name: str
    nodes: str | None          # hostlist; None: every node (Nodes=ALL)
    priority_tier: int = 1
    priority_job_factor: int = 1


@dataclass
class PartitionsRead(BadLines):
    source: str
    partitions: dict[str, SlurmPartition] = field(default_factory=dict)
    lines: int = 0

    def report(self) -> dict:
        return {"source": self.source, "lines": self.lines, "partitions": len(self.partitions),
                **self.bad_report("lines")}

    def summary(self) -> str:
        return "; ".join([f"{self.source}: {len(self.partitions):,} partitions from {self.lines:,} lines",
                          *self.bad_summary("lines", "not used")])


MAX_TIER = 65533   # Slurm's largest PriorityTier and PriorityJobFactor (16 bits less its special values)


def _whole(fields: dict[str, str], key: str) -> int:
    text = fields.get(key, "1").strip()
    if not text.isdigit() or int(text) > MAX_TIER:
        raise ValueError(f"unreadable {key}")
    return int(text)


def read_partitions(text: str, source: str = "scontrol show partition -o") -> PartitionsRead:
    out = PartitionsRead(source)
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        out.lines += 1
        fields: dict[str, str] = {}
        words = line.split()
        if not all("=" in w for w in words):
            out.bad_row(lineno, "a word that is not KEY=VALUE")
            continue
        for w in words:
            k, _, v = w.partition("=")
            fields.setdefault(k, v)
        name = fields.get("PartitionName", "").strip()
        if not name:
            out.bad_row(lineno, "no PartitionName")
            continue
        try:
            tier, factor = _whole(fields, "PriorityTier"), _whole(fields, "PriorityJobFactor")
        except ValueError as why:
            out.bad_row(lineno, str(why))
            continue
        nodes_text = fields.get("Nodes", "").strip()
        if nodes_text in _NO_NODES:
            out.skipped["partitions without nodes"] += 1
            continue
        nodes: str | None = None
        if nodes_text != "ALL":
            try:
                expand(nodes_text)
            except ValueError:
                out.bad_row(lineno, "Nodes is not a hostlist")
                continue
            nodes = nodes_text
        if name in out.partitions:
            out.bad_row(lineno, "a partition named twice")
            continue
        out.partitions[name] = SlurmPartition(name, nodes, tier, factor)
    return out


def scenario_fields(read: PartitionsRead, pools: dict[str, int], hostnames: dict[str, str],
                    multifactor: bool) -> dict:
    """What a replay scenario needs of the partitions: `queues` (node sets, tiers), `hostnames`
    (the pools' Slurm names: those given, else, for a cluster spec of one pool, every node the
    partitions name, in hostlist order) and, for multifactor, `partition_priority`. Raises
    UserError when the partitions' nodes cannot be laid on the pools."""
    named: dict[str, None] = {}
    for p in read.partitions.values():
        if p.nodes is not None:
            named.update(dict.fromkeys(expand(p.nodes)))
    names = dict(hostnames)
    for pool, expr in names.items():
        if pool not in pools:
            raise UserError(f"no node pool {pool!r} in the cluster spec (valid: {', '.join(pools)})",
                            field="--hostnames")
        try:
            n = len(expand(expr))
        except ValueError as why:
            raise UserError(f"{pool}={expr}: not a hostlist: {why}", field="--hostnames") from None
        if n != pools[pool]:
            raise UserError(f"{pool}={expr} names {n} nodes; pool {pool!r} has {pools[pool]}", field="--hostnames")
    if named and not names:
        if len(pools) == 1 and len(named) == next(iter(pools.values())):
            names = {next(iter(pools)): compress(sorted(named))}
        else:
            have = ", ".join(f"{k} ({v} nodes)" for k, v in pools.items())
            raise UserError(f"the partitions name {len(named)} nodes ({compress(sorted(named))}); the cluster spec's "
                            f"pools are {have}: give each pool its Slurm node names, --hostnames POOL=HOSTLIST",
                            field="--hostnames")
    known = {n for expr in names.values() for n in expand(expr)}
    missing = [n for n in named if n not in known]
    if missing:
        raise UserError(f"the partitions name nodes no pool has: {compress(missing)} (--hostnames gives "
                        f"{', '.join(names.values()) or 'none'})", field="--hostnames")
    queues: dict[str, dict] = {}
    for p in read.partitions.values():
        q: dict = {}
        if p.nodes is not None:
            q["nodes"] = p.nodes
        q["priority_tier"] = p.priority_tier
        queues[p.name] = q
    out: dict = {"queues": queues}
    if names:
        out["hostnames"] = names
    if multifactor:
        out["partition_priority"] = {p.name: p.priority_job_factor for p in read.partitions.values()}
    return out
