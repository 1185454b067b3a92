"""The IMDS source: poll the instance metadata service and turn its notices into events.

``client`` speaks the IMDS wire protocol (IMDSv2 tokens, v1 fallback, retries), ``parsers`` turns
bodies into ``InterruptionEvent``s (pure), ``monitor`` polls the enabled paths and emits each new
event once.
"""

from kubespot.sources.imds.client import ImdsClient, InstanceIdentity
from kubespot.sources.imds.errors import (
    ImdsError,
    ImdsHttpError,
    ImdsParseError,
    ImdsTokenError,
    ImdsUnavailable,
)
from kubespot.sources.imds.monitor import EventSink, ImdsHealth, ImdsMonitor

__all__ = [
    "EventSink",
    "ImdsClient",
    "ImdsError",
    "ImdsHealth",
    "ImdsHttpError",
    "ImdsMonitor",
    "ImdsParseError",
    "ImdsTokenError",
    "ImdsUnavailable",
    "InstanceIdentity",
]
