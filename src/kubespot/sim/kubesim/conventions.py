"""Names kubesim uses on objects to steer its simulated kubelet, shared by generator and controllers.

These are simulation knobs, not Kubernetes API: a real cluster ignores them.
"""

from __future__ import annotations

PREFIX = "kubesim.kubespot.io/"

#: Pod annotation: seconds the simulated container takes to exit after SIGTERM (float). Without it
#: a pod exits after ``DEFAULT_SHUTDOWN_SECONDS`` or its grace period, whichever is shorter; a pod
#: that should use its whole grace period sets a value >= the grace period.
SHUTDOWN_SECONDS = PREFIX + "shutdown-seconds"

#: Pod annotation: seconds from binding until the container runs and becomes Ready (float).
START_SECONDS = PREFIX + "start-seconds"

DEFAULT_SHUTDOWN_SECONDS = 1.0
DEFAULT_START_SECONDS = 1.0

#: Node label/annotation the generator sets so tests can find the simulated instance quickly.
INSTANCE_ID_LABEL = PREFIX + "instance-id"

#: Node annotation: ``external`` makes the Node's simulated kubelet run as with
#: ``--cloud-provider=external``: it registers the Node with the
#: ``node.cloudprovider.kubernetes.io/uninitialized`` taint, which the simulated cloud node controller
#: removes once it has set the providerID and the instance-type/zone/region labels.
CLOUD_PROVIDER_ANNOTATION = PREFIX + "cloud-provider"
