"""The records the agent and the operator exchange on a Node, one codec for both sides (pure: data in,
JSON out, no I/O): ``interruption`` (``kubespot.io/interruption``: which event holds the node, its
phase, the holder's heartbeat), ``actions`` (``kubespot.io/actions``: the AWS actions taken for it,
and what the drain waits for), ``annotation_json`` (the strict readers both share)."""
