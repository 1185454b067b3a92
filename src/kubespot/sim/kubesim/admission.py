"""The mutating admission and defaulting an object gets from a real API server before it is stored.

Objects loaded at start-up (an already-running cluster) do not pass through admission.

- **TaintNodesByCondition** (plugin/pkg/admission/nodetaint/admission.go, on by default): every Node
  created through the API gets ``node.kubernetes.io/not-ready:NoSchedule``, so nothing is scheduled
  to it before the node lifecycle controller has seen it Ready and removed the taint.
- Defaults of the v1 API (pkg/apis/core/v1/defaults.go SetDefaults_PodSpec, SetDefaults_Container):
  restartPolicy, dnsPolicy, terminationGracePeriodSeconds 30, schedulerName, enableServiceLinks,
  securityContext, and per container terminationMessagePath/Policy and imagePullPolicy.
- DefaultTolerationSeconds (plugin/pkg/admission/defaulttolerationseconds/admission.go): a pod that
  does not already tolerate ``node.kubernetes.io/not-ready`` and ``node.kubernetes.io/unreachable``
  with NoExecute gets a 300 s toleration of each, on create and update.
- Priority (plugin/pkg/admission/priority/admission.go): on create, ``spec.priority`` and
  ``spec.preemptionPolicy`` come from the named PriorityClass (the cluster's globalDefault class, or
  0, when none is named); an unknown class or a priority that disagrees is 403 Forbidden. On update
  it keeps what it set at create: a pod whose new spec has no ``priority`` or ``preemptionPolicy``
  (``kubectl replace`` from a manifest) gets the old pod's, so validation does not see them change.
- DefaultStorageClass (plugin/pkg/admission/storage/storageclass/setdefault/admission.go, on by
  default): a PVC created with neither ``spec.storageClassName`` nor the beta storage-class
  annotation gets the default class (pkg/volume/util/storageclass.go GetDefaultClass: the classes
  annotated is-default-class "true", the newest, then the first by name); none, no change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .errors import ApiError

Obj = dict[str, Any]

#: The classes every API server creates at start-up (pkg/apis/scheduling SystemPriorityClasses).
SYSTEM_PRIORITY_CLASSES = {"system-node-critical": 2_000_001_000, "system-cluster-critical": 2_000_000_000}
NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
DEFAULT_TOLERATION_SECONDS = 300
NOT_READY_TAINT = {"key": NOT_READY, "effect": "NoSchedule"}

#: Looks a PriorityClass up by name (None: no such class); with no name, the globalDefault class.
PriorityClasses = Callable[[str | None], Obj | None]


def admit_node_create(node: Obj) -> None:
    """Add the not-ready NoSchedule taint to a new Node unless it has it already (in place)."""
    spec = node.setdefault("spec", {})
    taints = list(spec.get("taints") or [])
    if not any(t.get("key") == NOT_READY_TAINT["key"] and t.get("effect") == "NoSchedule" for t in taints):
        taints.append(dict(NOT_READY_TAINT))
    spec["taints"] = taints


def pod_spec_defaults(spec: Obj) -> None:
    """SetDefaults_PodSpec and SetDefaults_Container for the fields kubesim and its clients read."""
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("securityContext", {})
    for part in ("initContainers", "containers"):
        for c in spec.get(part) or ():
            if isinstance(c, dict):
                _container_defaults(c)


def _container_defaults(c: Obj) -> None:
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    if "imagePullPolicy" not in c:
        image = str(c.get("image") or "")
        tag = image.rsplit("/", 1)[-1].partition(":")[2] if "@" not in image else "digest"
        c["imagePullPolicy"] = "Always" if tag in ("", "latest") else "IfNotPresent"


def _tolerates(tolerations: list[Obj], key: str) -> bool:
    return any(
        t.get("key") in (key, "", None) and t.get("effect") in ("NoExecute", "", None) for t in tolerations
    )


def default_toleration_seconds(spec: Obj) -> None:
    """DefaultTolerationSeconds: add what the pod does not already tolerate (any key matches an empty
    key, any effect an empty effect)."""
    tolerations = spec.get("tolerations") or []
    added = [
        {
            "key": key,
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": DEFAULT_TOLERATION_SECONDS,
        }
        for key in (NOT_READY, UNREACHABLE)
        if not _tolerates(tolerations, key)
    ]
    if added:
        spec["tolerations"] = [*tolerations, *added]


def admit_priority(name: str, spec: Obj, classes: PriorityClasses) -> None:
    """The Priority plugin on create: priority and preemptionPolicy from the pod's class."""
    class_name = spec.get("priorityClassName") or None
    pc = classes(class_name)
    if class_name is not None and pc is None:
        raise _forbidden(name, f"no PriorityClass with name {class_name} was found")
    priority = int(pc.get("value", 0)) if pc is not None else 0
    policy = (pc or {}).get("preemptionPolicy") or "PreemptLowerPriority"
    if spec.get("priority") is not None and spec["priority"] != priority:
        raise _forbidden(
            name,
            f"the integer value of priority ({spec['priority']}) must not be provided in pod spec; priority "
            f"admission controller computed {priority} from the given PriorityClass name",
        )
    if spec.get("preemptionPolicy") is not None and spec["preemptionPolicy"] != policy:
        raise _forbidden(
            name,
            f"the string value of PreemptionPolicy ({spec['preemptionPolicy']}) must not be provided in pod "
            f"spec; priority admission controller computed {policy} from the given PriorityClass name",
        )
    if pc is not None and class_name is None:
        spec["priorityClassName"] = pc["metadata"]["name"]
    spec["priority"] = priority
    spec["preemptionPolicy"] = policy


def admit_pod_update(spec: Obj, old_spec: Obj) -> None:
    """The mutating admission of a pod update (PUT or patch of the main resource), in place:
    DefaultTolerationSeconds as on create, and the Priority plugin's update branch (admitPod), which
    restores ``priority`` and ``preemptionPolicy`` from the old pod when the new spec lacks them."""
    default_toleration_seconds(spec)
    for field in ("priority", "preemptionPolicy"):
        if spec.get(field) is None and old_spec.get(field) is not None:
            spec[field] = old_spec[field]


#: PersistentVolumeClaimHasClass: this annotation, even empty, is a class (pkg/apis/core/helper).
BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
DEFAULT_CLASS_ANNOTATIONS = (
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
)


def admit_pvc_create(pvc: Obj, storage_classes: Iterable[Obj], created_at: Callable[[Obj], float]) -> None:
    """DefaultStorageClass on create, in place: the default class for a claim without one."""
    spec = pvc.setdefault("spec", {})
    if spec.get("storageClassName") is not None:
        return  # "" included: the claim asks for no class
    if BETA_STORAGE_CLASS in ((pvc.get("metadata") or {}).get("annotations") or {}):
        return
    defaults = [
        sc
        for sc in storage_classes
        if any(
            ((sc.get("metadata") or {}).get("annotations") or {}).get(a) == "true"
            for a in DEFAULT_CLASS_ANNOTATIONS
        )
    ]
    if defaults:
        newest = min(defaults, key=lambda sc: (-created_at(sc), sc["metadata"]["name"]))
        spec["storageClassName"] = newest["metadata"]["name"]


def _forbidden(name: str, why: str) -> ApiError:
    return ApiError(
        403,
        f'pods "{name}" is forbidden: {why}',
        reason="Forbidden",
        details={"name": name, "kind": "pods"},
    )
