"""NCCL environment suited to a plan's scale-out fabric."""

from __future__ import annotations

from gpucluster.generate.plan_file import JobPlan


def nccl_env(plan: JobPlan, socket_ifname: str | None = None) -> list[tuple[str, str, str]]:
    """(name, value, why) in the order they should be exported."""
    link = plan.scale_out_link
    env: list[tuple[str, str, str]] = [("NCCL_DEBUG", "WARN", "INFO floods the log of every rank")]
    if link in ("InfiniBand", "RoCE"):
        env.append(("NCCL_IB_DISABLE", "0", f"{link}: NCCL's IB verbs transport (RDMA)"))
        if link == "RoCE":
            env.append(("NCCL_IB_GID_INDEX", "3", "RoCE v2 GID (the usual index on Linux)"))
    elif link == "Ethernet":
        env += [("NCCL_IB_DISABLE", "1", "plain Ethernet: no RDMA, TCP sockets"),
                ("NCCL_SOCKET_NTHREADS", "4", "TCP: more socket threads per connection"),
                ("NCCL_NSOCKS_PERTHREAD", "4", "TCP: more sockets per thread")]
    env.append(("NCCL_SOCKET_IFNAME", socket_ifname or "^lo,docker",
                "bootstrap/TCP interface" + ("" if socket_ifname else ": anything but loopback and docker")))
    env.append(("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1", "a failed rank ends the job instead of hanging it"))
    return env
