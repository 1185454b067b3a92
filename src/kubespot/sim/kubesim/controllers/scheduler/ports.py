"""NodePorts: a pod's host ports against those the node's pods already use.

Upstream (pkg/scheduler/framework/plugins/nodeports, ``getContainerPorts`` and
``HostPortInfo.CheckConflict``): only app containers' ports with a ``hostPort`` count; the protocol
defaults to TCP and an empty host IP means 0.0.0.0, which conflicts with every IP on the same
protocol and port, as a specific IP conflicts with itself and with 0.0.0.0.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

REASON_PORTS = "node(s) didn't have free ports for the requested pod ports"
_ANY_IP = "0.0.0.0"  # a host IP value meaning any

HostPort = tuple[str, str, int]


def host_ports(spec: dict[str, Any]) -> tuple[HostPort, ...]:
    """(protocol, host IP, host port) of every container port with a host port."""
    out = []
    for c in spec.get("containers") or []:
        for p in c.get("ports") or []:
            port = p.get("hostPort") or 0
            if isinstance(port, int) and port > 0:
                out.append((str(p.get("protocol") or "TCP"), str(p.get("hostIP") or _ANY_IP), port))
    return tuple(out)


def conflicts(wanted: tuple[HostPort, ...], used: Counter[HostPort]) -> bool:
    for proto, ip, port in wanted:
        if used[(proto, ip, port)] > 0:
            return True
        if ip == _ANY_IP:
            if any(u[0] == proto and u[2] == port and n > 0 for u, n in used.items()):
                return True
        elif used[(proto, _ANY_IP, port)] > 0:
            return True
    return False
