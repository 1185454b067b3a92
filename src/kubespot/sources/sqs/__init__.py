"""The SQS source: EventBridge, Auto Scaling and Health messages from the interruption queue, turned
into the same ``InterruptionEvent``s the IMDS source produces."""
