"""The interruption queue, read by this controller alone (as Karpenter keeps its SQS provider with
its interruption controller): the consumer (long polls, a task per message, batched renewals), the
parsers of EventBridge, Auto Scaling, SNS-wrapped and Health messages into the same
``InterruptionEvent``s the IMDS source produces, and their errors."""
