"""The NodeClaim controller (issue 14): Karpenter's NodeClaim lifecycle and garbage collection.

``objects`` (pure): what is read of a NodeClaim and a Node, Karpenter's keys, the condition set.
``launch``: capacity from the cloud and what its answer writes. ``registration``,
``initialization``, ``liveness`` and ``lifecycle`` (pure): one reconcile's decisions.
``termination``: the finalizer (drain, Node, instance, finalizer last). ``garbage_collection``:
instances without a claim, claims without an instance. ``loop``: the reconcile loop (watches,
per-claim tasks, retries, writes). ``controller``: the parts wired, /healthz.
"""
