"""Handling: what to do about an interruption event (policy) and what was done (per-node state).

Sits between sources (which produce events) and actions (which change the cluster); it decides,
it does not do I/O itself.
"""
