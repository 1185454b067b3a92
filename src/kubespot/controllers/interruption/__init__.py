"""The queue path: interruption messages from SQS to the node handlers that fence and drain, ASG
lifecycle hooks completed when the work ends, scheduled changes armed on the Node."""
