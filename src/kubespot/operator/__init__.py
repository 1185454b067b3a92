"""``kubespot controller``: the cluster-wide operator process. Its command, its runtime (which wires
the controllers of ``kubespot.controllers`` together and supervises them) and leader election."""
