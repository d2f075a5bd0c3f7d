"""Two emulated nodes: network namespaces A and B joined through a bridge in a third namespace
(nothing in the root namespace is touched), optionally with the link of A capped by tbf in both
directions. Addresses are the namespaces' own; every namespace is deleted afterwards."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from contextlib import contextmanager
from dataclasses import dataclass


def why_not() -> str | None:
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "tc", "nsenter"):
        if shutil.which(tool) is None:
            return f"{tool} not installed (apt-get install iproute2 util-linux)"
    name = f"gpc-probe-{uuid.uuid4().hex[:6]}"
    p = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True, timeout=10)
    if p.returncode:
        return f"ip netns add refused: {p.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=10)
    return None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=10)


@dataclass
class Net:
    a: str           # namespace names
    b: str
    addr_a: str
    addr_b: str
    if_a: str
    if_b: str

    def cmd(self, ns: str, argv: list[str]) -> list[str]:
        return ["nsenter", f"--net=/run/netns/{ns}", *argv]


@contextmanager
def two_nodes(cap: str | None = None):
    """cap: a tbf rate such as '1gbit' on node A's link (both directions)."""
    tag = uuid.uuid4().hex[:6]
    a, b, br = f"gpc-a-{tag}", f"gpc-b-{tag}", f"gpc-br-{tag}"
    made = []
    try:
        for ns in (br, a, b):
            _ip("netns", "add", ns)
            made.append(ns)
            _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", br, "link", "add", "br0", "type", "bridge")
        _ip("-n", br, "link", "set", "br0", "up")
        net = Net(a, b, "10.213.7.1", "10.213.7.2", "eth-a", "eth-b")
        for ns, ifname, addr, peer in ((a, net.if_a, net.addr_a, "pa"), (b, net.if_b, net.addr_b, "pb")):
            _ip("-n", ns, "link", "add", ifname, "type", "veth", "peer", "name", peer, "netns", br)
            _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", ifname)
            _ip("-n", ns, "link", "set", ifname, "up")
            _ip("-n", br, "link", "set", peer, "master", "br0")
            _ip("-n", br, "link", "set", peer, "up")
        if cap:
            for ns, dev in ((a, net.if_a), (br, "pa")):
                subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", dev, "root", "tbf",
                                "rate", cap, "burst", "256kb", "latency", "50ms"], check=True, capture_output=True,
                               timeout=10)
        yield net
    finally:
        for ns in reversed(made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10)
