"""Volume detachment before an instance is terminated: the VolumeAttachments still attached to a
deleted NodeClaim's Node, as Karpenter's node termination waits for them (kubernetes-sigs/karpenter
``pkg/controllers/node/termination/controller.go`` ``awaitVolumeDetachment``/``ensureVolumesDetached``,
``pkg/utils/node`` ``GetVolumeAttachments``: ``storage.k8s.io/v1`` VolumeAttachments whose
``spec.nodeName`` is the Node's).

Only attachments of a PersistentVolume count (``filterVolumeAttachments`` drops those without
``spec.source.persistentVolumeName``). Terminating the instance first races the detach, and the
replacement pod elsewhere waits on ``Multi-Attach error`` until the attach/detach controller's
force-detach (6 min). A server that does not serve VolumeAttachments (404) has none to wait for.
"""

from __future__ import annotations

from kubespot.kube import KubeClient

__all__ = ["VOLUME_ATTACHMENTS", "attached_volumes"]

VOLUME_ATTACHMENTS = "apis/storage.k8s.io/v1/volumeattachments"


async def attached_volumes(kube: KubeClient, node_name: str) -> list[str]:
    """The names of the PersistentVolumes still attached to ``node_name``, sorted."""
    listed = await kube.list_versioned(VOLUME_ATTACHMENTS)
    if listed is None:
        return []
    out = []
    for va in listed[0]:
        spec = va.get("spec") or {}
        pv = (spec.get("source") or {}).get("persistentVolumeName")
        if spec.get("nodeName") == node_name and pv:
            out.append(str(pv))
    return sorted(out)
