"""Names kubesim uses on objects to steer its simulated kubelet, shared by generator and controllers.

These are simulation knobs, not Kubernetes API: a real cluster ignores them.
"""

from __future__ import annotations

PREFIX = "kubesim.kubespot.io/"

#: Pod annotation: seconds the simulated container takes to exit after SIGTERM (float). Without it
#: a pod exits after ``DEFAULT_SHUTDOWN_SECONDS`` or its grace period, whichever is shorter; a pod
#: that should use its whole grace period sets a value >= the grace period.
SHUTDOWN_SECONDS = PREFIX + "shutdown-seconds"

#: Pod annotation: what the simulated containers do with SIGTERM (``controllers/termination.py``):
#: ``handled`` (default: exit 0 after ``SHUTDOWN_SECONDS``), ``default`` (no handler: killed by the
#: signal at once, exit code 143) or ``ignored`` (a PID 1 without a handler: runs until SIGKILL, 137).
SIGTERM = PREFIX + "sigterm"

#: Pod annotation: seconds an ``exec`` or ``httpGet`` preStop hook runs (float, default 0); a
#: ``sleep`` hook runs its own ``seconds``.
PRESTOP_SECONDS = PREFIX + "prestop-seconds"

#: ``SHUTDOWN_SECONDS``, ``SIGTERM`` and ``PRESTOP_SECONDS`` may be given for one container as
#: ``<annotation>.<container name>``, which wins over the pod-wide value for that container.

#: Pod annotation: seconds from binding until the container runs and becomes Ready (float).
START_SECONDS = PREFIX + "start-seconds"

DEFAULT_SHUTDOWN_SECONDS = 1.0
DEFAULT_START_SECONDS = 1.0

#: Node annotation: seconds a Node created through the API reports Ready False before its simulated
#: kubelet posts Ready True (float; default ``ControllerConfig.node_ready_seconds``). The node joiner
#: sets it so kubesim's kubelet and the joiner agree on when a booting instance turns Ready.
READY_SECONDS = PREFIX + "ready-seconds"

#: Node label/annotation the generator sets so tests can find the simulated instance quickly.
INSTANCE_ID_LABEL = PREFIX + "instance-id"

#: Node annotation: ``external`` makes the Node's simulated kubelet run as with
#: ``--cloud-provider=external``: it registers the Node with the
#: ``node.cloudprovider.kubernetes.io/uninitialized`` taint, which the simulated cloud node controller
#: removes once it has set the providerID and the instance-type/zone/region labels.
CLOUD_PROVIDER_ANNOTATION = PREFIX + "cloud-provider"
