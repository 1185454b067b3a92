"""The provisioning controller (issue 13): the status of Karpenter's API objects and the catalog.

``conditions`` (pure): status conditions merged as Karpenter's (awslabs/operatorpkg ``status``)
condition sets keep them, with the root ``Ready``. ``nodeclass_status`` / ``nodepool_status``
(pure): an EC2NodeClass's and a NodePool's status from what was resolved. ``resolver``: one
EC2NodeClass's selector terms through the AWS adapter. ``status_loop``: the reconcile loop (watch,
periodic resync, retries, status writes only on change). ``catalog_refresh``: the instance type
catalog and prices kept fresh, retried with backoff when AWS fails.

The provisioner (issue 14): ``pending`` (which pods are provisionable; the watch that triggers the
``batcher``), ``provisioner`` (a pass: snapshot, simulation, limits re-checked, NodeClaims created;
the NodeClaim deletion watch that re-plans at once), ``nodeclaim_template`` (pure: a planned claim
as the NodeClaim object), ``nominations`` (pod → NodeClaim, ``Nominated`` events),
``nodepool_counter`` (``status.resources`` / ``status.nodes``, written by the status loop).
"""
