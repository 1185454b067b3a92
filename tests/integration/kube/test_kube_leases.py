"""The Kubernetes adapter's Lease calls (kube/leases.py) and node deletion over real HTTP on kubesim:
what leader election relies on is compare-and-set (a stale resourceVersion gets a 409) and a record
that round-trips exactly (MicroTime renewTime, an empty holder after a release)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kubespot.config.kube import KubeSettings
from kubespot.kube import KubeError, LeaseRecord, Leases, connect
from kubespot.sim.kubesim.app import KubeSim
from kubespot.sim.kubesim.testing import node, until

NS, NAME = "kube-system", "kubespot-controller"
AT = datetime(2026, 11, 22, 3, 0, 1, 123456, tzinfo=UTC)


async def test_lease_create_read_and_compare_and_set() -> None:
    async with KubeSim() as sim:
        kube = connect(KubeSettings(kubeconfig=str(sim.kubeconfig_path)))
        try:
            leases = Leases(kube)
            assert await leases.get(NS, NAME) is None
            record = LeaseRecord(holder="a_1", duration_seconds=15, acquire_time=AT, renew_time=AT)
            created = await leases.create(NS, NAME, record)
            assert created.record == record  # microseconds survive (MicroTime)
            with pytest.raises(KubeError) as exists:
                await leases.create(NS, NAME, record)
            assert exists.value.code == 409

            # Somebody labels the lease: a renewal keeps the label (only the spec is replaced).
            rt = sim.store.registry.lookup("coordination.k8s.io", "v1", "leases")
            assert rt is not None

            def label(obj: dict[str, Any]) -> None:
                obj["metadata"].setdefault("labels", {})["team"] = "sre"

            sim.store.mutate(rt, NS, NAME, label)
            read = await leases.get(NS, NAME)
            assert read is not None and read.resource_version != created.resource_version
            later = AT + timedelta(seconds=2)
            renewed = await leases.update(read, LeaseRecord("a_1", 15, AT, later, 0))
            assert renewed.record.renew_time == later
            stored = sim.store.find(rt, NS, NAME)
            assert stored is not None and stored["metadata"]["labels"] == {"team": "sre"}

            # A write based on a stale read loses: that is what keeps two leaders from both winning.
            with pytest.raises(KubeError) as conflict:
                await leases.update(read, LeaseRecord("b_2", 15, later, later, 1))
            assert conflict.value.code == 409

            released = await leases.update(renewed, LeaseRecord("", 1, later, later, 0))
            assert released.record.holder == ""
            stored = sim.store.find(rt, NS, NAME)
            assert stored is not None
            assert stored["spec"]["holderIdentity"] == ""
            assert stored["spec"]["leaseDurationSeconds"] == 1
        finally:
            await kube.close()


async def test_node_ready_since_and_delete() -> None:
    async with KubeSim(objects=[node("n1")]) as sim:
        kube = connect(KubeSettings(kubeconfig=str(sim.kubeconfig_path)))
        try:

            async def ready() -> bool:
                view = await kube.get_node("n1")
                return view is not None and view.ready is True

            await until(ready)
            view = await kube.get_node("n1")
            assert view is not None and view.ready_since is not None
            assert abs((datetime.now(tz=UTC) - view.ready_since).total_seconds()) < 60
            assert await kube.delete_node("n1") is True
            assert await kube.get_node("n1") is None
            assert await kube.delete_node("n1") is False
        finally:
            await kube.close()
