"""``kubespot agent``: the per-node DaemonSet process (``command`` parses and starts it, ``runtime``
wires the IMDS monitor, the node handler, the webhook and the metrics and probe servers).

The agent speaks HTTP/1.1 only (IMDS, the API server, webhooks). httpcore imports the HTTP/2 stack
(h2, hpack) whenever it is installed, and hpack's Huffman table alone lifts peak memory by ~10 MiB
while it loads — on every node. Marking ``h2`` unavailable before anything imports httpcore makes it
take its documented no-HTTP/2 path.
"""

import sys

sys.modules.setdefault("h2", None)  # type: ignore[arg-type]
