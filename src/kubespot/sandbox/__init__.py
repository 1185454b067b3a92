"""``kubespot sandbox``: a simulated cluster with real agents, interruptions fired at it, and a verdict.

A composition root like ``kubespot.cli``: it wires the simulators (kubesim, imdssim) to real
``kubespot agent`` processes and watches what happens over the Kubernetes API. See docs/sandbox.md.
"""
