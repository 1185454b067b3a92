"""kubespot's extensions to moto, installed by ``MotoServer.start()``.

Each module patches one gap measured in moto 5.2.x (see ``docs/simulators/awssim.md``):

- ``sqs_depth``: ReceiveMessage / DeleteMessage / ChangeMessageVisibility no longer walk (and
  re-walk) the whole queue, so a queue 2 000 deep still serves hundreds of receive+delete a second.
- ``events_account``: the event EventBridge delivers to an SQS target carries ``account``.
- ``lifecycle``: Auto Scaling lifecycle actions (tokens, ``Terminating:Wait``), plus
  ``CompleteLifecycleAction`` and ``RecordLifecycleActionHeartbeat``; PutLifecycleHook keeps its
  notification target and metadata.
- ``spot_prices``: DescribeSpotPriceHistory answers from a synthetic market (a stable discount per
  type and zone off the on-demand table, drifting slowly), with StartTime/EndTime and paging.
- ``pricing``: the Price List Service's GetProducts for EC2 (moto has no Pricing API), served in
  front of moto from the on-demand table.
- ``ssm_amis``: the public SSM parameters of the EKS-optimized, Bottlerocket and Windows AMIs,
  backed by AMIs registered in moto's EC2 backend.
- ``catalog_cache``: DescribeInstanceTypes and DescribeInstanceTypeOfferings written by a fast
  per-entry writer (moto's serialiser took ~5 ms per type: 8-10 s per process), paged by MaxResults.
  (``xml_writer``, the writer, is a helper of it and of ``spot_prices``, not an extension.)
- ``fleet`` (with ``market``, ``allocation``, ``reclaims``): a spot market. CreateFleet ``instant``
  honours the target split, overrides, priorities and allocation strategies over finite capacity
  pools, answering EC2's insufficient-capacity ``Errors``; spot instances carry
  ``SpotInstanceRequestId``; ``ClientToken`` is idempotent; the ``instance-lifecycle`` filter works;
  pools and zones can be reclaimed (rebalance, interruption warning, termination two minutes later,
  through EventBridge).
- ``run_instances``: RunInstances draws from the market's pools (``InsufficientInstanceCapacity``,
  ``SpotMaxPriceTooLow``).
- ``spot_request_ids``: every spot instance carries its ``SpotInstanceRequestId``.
- ``image_lookup``: an instance launch finds its AMI by id (moto filtered every image: 18 ms each).
- ``iam_paths``: ListInstanceProfiles honours ``PathPrefix``.
- ``elbv2_draining``: deregistered targets are ``draining`` for the target group's deregistration
  delay, and deregistering a target that is not registered succeeds, as on AWS.

Installation patches moto's classes in this process, once; calling ``install_all`` again is a no-op.
"""

from __future__ import annotations

import threading

from kubespot.sim.awssim.extensions import (
    catalog_cache,
    elbv2_draining,
    events_account,
    fleet,
    iam_paths,
    image_lookup,
    lifecycle,
    pricing,
    run_instances,
    spot_prices,
    spot_request_ids,
    sqs_depth,
    ssm_amis,
)

__all__ = ["install_all", "installed"]

_lock = threading.Lock()
_installed: list[str] = []


def install_all() -> None:
    """Install every extension into moto (idempotent, thread-safe)."""
    with _lock:
        if _installed:
            return
        for module in (
            sqs_depth,
            events_account,
            lifecycle,
            spot_prices,
            elbv2_draining,
            pricing,
            ssm_amis,
            catalog_cache,
            fleet,
            run_instances,
            image_lookup,
            spot_request_ids,
            iam_paths,
        ):
            module.install()
            _installed.append(module.__name__.rsplit(".", 1)[-1])


def installed() -> list[str]:
    """Names of the installed extensions, in installation order."""
    return list(_installed)
