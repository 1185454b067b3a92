"""The IMDS paths the source reads (relative to the service's base URL)."""

from __future__ import annotations

TOKEN = "/latest/api/token"
TOKEN_TTL_HEADER = "X-aws-ec2-metadata-token-ttl-seconds"
TOKEN_HEADER = "X-aws-ec2-metadata-token"

SPOT_INSTANCE_ACTION = "/latest/meta-data/spot/instance-action"
REBALANCE = "/latest/meta-data/events/recommendations/rebalance"
SCHEDULED_EVENTS = "/latest/meta-data/events/maintenance/scheduled"
ASG_TARGET_LIFECYCLE_STATE = "/latest/meta-data/autoscaling/target-lifecycle-state"

IDENTITY_DOCUMENT = "/latest/dynamic/instance-identity/document"
LOCAL_HOSTNAME = "/latest/meta-data/local-hostname"
LOCAL_IPV4 = "/latest/meta-data/local-ipv4"
LIFE_CYCLE = "/latest/meta-data/instance-life-cycle"
PUBLIC_IPV4 = "/latest/meta-data/public-ipv4"
PUBLIC_HOSTNAME = "/latest/meta-data/public-hostname"
