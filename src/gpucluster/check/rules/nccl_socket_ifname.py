"""NCCL_SOCKET_IFNAME naming an interface the nodes do not have.

With `--interfaces` (the output of `ip -br link` on a node) the names are checked exactly
(NCCL matches a prefix unless the name starts with `=`; `^` lists are exclusions and are not
checked). Without it, what the spec implies: `ib*` (IPoIB) exists only on InfiniBand NICs,
one per port (ib0..ib{n-1}); loopback and container bridges (lo, docker*, virbr*, veth*,
cni*, flannel*, cali*) do not reach other nodes."""

from __future__ import annotations

import re

from gpucluster.check.findings import Finding
from gpucluster.check.rules.base import Rule, rule

LOCAL_ONLY = ("lo", "docker", "virbr", "veth", "cni", "flannel", "cali")


@rule
class NcclSocketIfname(Rule):
    id = "nccl-socket-ifname"
    summary = "NCCL_SOCKET_IFNAME names an interface that does not exist"

    def check(self, ctx):
        for job, s in ctx.job_settings("NCCL_SOCKET_IFNAME"):
            value = s.value.strip()
            if not value or value.startswith("^") or value.startswith("$"):
                continue
            exact = value.startswith("=")
            for name in filter(None, (n.strip() for n in value.lstrip("=").split(","))):
                why = self._why_missing(ctx, name, exact)
                if why:
                    yield Finding(self.id, "error", f"NCCL_SOCKET_IFNAME={value}: {why}",
                                  "name an interface every node has (ip -br link), e.g. ib0 on InfiniBand or the "
                                  "front-end Ethernet port; or leave it unset and let NCCL choose",
                                  {"value": value, "interface": name, "nic": ctx.pool.nic,
                                   "nics_per_node": ctx.pool.nics_per_node,
                                   "known_interfaces": ",".join(ctx.interfaces) if ctx.interfaces else "from the spec"},
                                  job.at(s.line))

    @staticmethod
    def _why_missing(ctx, name: str, exact: bool) -> str | None:
        if ctx.interfaces is not None:
            if any(i == name if exact else i.startswith(name) for i in ctx.interfaces):
                return None
            how = "named" if exact else "starting with"
            return f"no interface {how} {name!r} among {', '.join(ctx.interfaces)}"
        if name == "lo" or name.startswith(LOCAL_ONLY[1:]):
            return f"{name} is loopback or a container bridge: it does not reach other nodes"
        m = re.fullmatch(r"ib(\d*)", name)
        if m:
            ib = [p for p in ctx.spec.node_pools if p.nic_entry.fabric == "infiniband"]
            if not ib:
                return f"{name} is an IPoIB interface but the cluster has no InfiniBand NICs ({ctx.pool.nic})"
            if m.group(1) and int(m.group(1)) >= max(p.nics_per_node for p in ib):
                n = max(p.nics_per_node for p in ib)
                return f"the nodes have {n} InfiniBand ports (ib0..ib{n - 1}); there is no {name}"
        return None
