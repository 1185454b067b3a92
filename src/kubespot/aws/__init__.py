"""The AWS adapter: the only package that imports the AWS SDK (boto3).

The SDK is synchronous; calls run on a bounded thread pool so the asyncio product code awaits them.
Typed helpers return plain data, so callers never touch boto3 objects.
"""
