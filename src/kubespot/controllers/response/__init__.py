"""The AWS actions taken on an interrupted node, each recorded in ``kubespot.io/actions``: the target
groups it leaves (before the drain), its isolation, the summary published to SNS/EventBridge."""
