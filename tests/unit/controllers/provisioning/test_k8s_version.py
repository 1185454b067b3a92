"""The Kubernetes version AMI aliases resolve at, as Karpenter keeps it.

Sources: aws/karpenter-provider-aws ``pkg/controllers/providers/version/controller.go``
(``Reconcile``: ``UpdateVersion`` again every 5 minutes; an error is returned and retried) and
``pkg/providers/version/version.go`` (``Get`` returns the version last stored).
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kubespot.config.pricing import PricingSettings
from kubespot.config.provisioning import ProvisioningSettings
from kubespot.controllers.provisioning import controller
from kubespot.controllers.provisioning.k8s_version import REFRESH_INTERVAL, KubernetesVersion
from kubespot.kube import KubeError
from kubespot.kube.custom import CustomObjects
from support.clocks import ManualClock


class Server:
    """``/version`` answers: the current one, or an error while ``down``."""

    def __init__(self, version: str) -> None:
        self.version = version
        self.down = False
        self.reads = 0

    async def read(self) -> str:
        self.reads += 1
        if self.down:
            raise KubeError(503, "unavailable")
        return self.version


async def test_a_control_plane_upgrade_reaches_the_aliases_within_five_minutes() -> None:
    """controller.go Reconcile requeues after 5 minutes: the version is read again then, so an
    upgrade from 1.32 to 1.33 shows without a restart; in between the stored one is used."""
    clock = ManualClock(datetime(2026, 11, 1, tzinfo=UTC))
    server = Server("1.32")
    version = KubernetesVersion(server.read, clock=clock)
    assert await version() == "1.32"
    server.version = "1.33"
    await clock.advance(REFRESH_INTERVAL - 1)
    assert await version() == "1.32" and server.reads == 1
    await clock.advance(1)
    assert await version() == "1.33" and server.reads == 2


async def test_a_failed_read_keeps_the_last_version_and_a_first_failure_is_raised() -> None:
    """version.go Get returns the stored version while UpdateVersion fails; with none stored yet
    the caller sees the error (the resolver reports it as a failure and retries)."""
    clock = ManualClock(datetime(2026, 11, 1, tzinfo=UTC))
    server = Server("1.32")
    server.down = True
    version = KubernetesVersion(server.read, clock=clock)
    with pytest.raises(KubeError):
        await version()
    server.down = False
    assert await version() == "1.32"
    server.down = True
    await clock.advance(REFRESH_INTERVAL)
    assert await version() == "1.32" and server.reads == 3


async def test_a_pinned_version_is_never_read() -> None:
    """provisioning.kubernetes_version set: the server is not asked (kubespot setting)."""
    server = Server("1.33")
    version = KubernetesVersion(
        server.read, clock=ManualClock(datetime(2026, 11, 1, tzinfo=UTC)), pinned="1.31"
    )
    assert await version() == "1.31" and server.reads == 0


async def test_the_built_controller_reads_the_version_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """controller.go Reconcile (every 5 minutes), as wired by ``controller.build``: the resolver's
    version follows the API server's after an upgrade."""
    server = Server("1.32")

    async def server_version(self: CustomObjects) -> str:
        return await server.read()

    monkeypatch.setattr(CustomObjects, "server_version", server_version)
    clock = ManualClock(datetime(2026, 11, 1, tzinfo=UTC))
    parts = controller.build(
        kube=object(),  # type: ignore[arg-type]
        aws=object(),  # type: ignore[arg-type]
        settings=ProvisioningSettings(),
        pricing=PricingSettings(),
        clock=clock,
        region="us-east-1",
    )
    read = parts.status._resolver._k8s_version
    assert await read() == "1.32"
    server.version = "1.33"
    await clock.advance(REFRESH_INTERVAL)
    assert await read() == "1.33"
