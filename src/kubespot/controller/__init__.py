"""``kubespot controller``: the cluster-wide queue processor (SQS fed by EventBridge)."""
