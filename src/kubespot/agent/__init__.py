"""``kubespot agent``: the per-node DaemonSet process (``command`` parses and starts it, ``runtime``
wires the IMDS monitor, the node handler, the webhook and the metrics and probe servers)."""
