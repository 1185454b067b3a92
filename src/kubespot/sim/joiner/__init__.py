"""joiner: plays the boot of EC2 instances tagged for a cluster, as Nodes in kubesim.

For each running instance of the cluster (moto / awssim over the wire), after a boot delay a Node
registers with what the instance's kubelet would give it (the labels and taints its user data asks
for, the well-known labels, capacity from the instance type), turns Ready, and goes away when the
instance terminates. It imports no product code; of the other simulators only kubesim's name rules.
See docs/simulators/joiner.md.
"""

from kubespot.sim.joiner.ec2 import Ec2Reader, Instance
from kubespot.sim.joiner.joiner import (
    NODE_MONITOR_GRACE_SECONDS,
    NODE_MONITOR_PERIOD_SECONDS,
    Joiner,
    JoinerConfig,
)
from kubespot.sim.joiner.kube import KubeError, KubeWriter
from kubespot.sim.joiner.userdata import BootConfig, parse

__all__ = [
    "NODE_MONITOR_GRACE_SECONDS",
    "NODE_MONITOR_PERIOD_SECONDS",
    "BootConfig",
    "Ec2Reader",
    "Instance",
    "Joiner",
    "JoinerConfig",
    "KubeError",
    "KubeWriter",
    "parse",
]
