"""The operator's controllers, one folder per concern; they never import each other (the operator
wires them): ``interruption`` (the queue path: SQS messages to node handlers, ASG lifecycle hooks,
scheduled changes), ``response`` (the AWS actions on an interrupted node: load-balancer
deregistration, isolation, published summaries), ``housekeeping`` (the leader's cluster-wide duties:
Node clean-up, the managed-instances gauge)."""
