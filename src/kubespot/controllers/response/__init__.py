"""The AWS actions taken on an interrupted node, each recorded in ``kubespot.io/actions``: the target
groups it leaves (before the drain), its isolation, the summary published to SNS/EventBridge.

``response_actions`` composes the runner: the loop over node changes (``loop``), one node brought
forward (``reconciler``, with ``claims`` for the record's writes and ``dry_run``), and one step per
action (``*_step``, on the ``step`` contract) next to the module that drives its AWS adapters
(``loadbalancer``, ``isolate``, ``publish``)."""
