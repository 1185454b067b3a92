"""The provisioning controller (issue 13): the status of Karpenter's API objects and the catalog.

``conditions`` (pure): status conditions merged as Karpenter's (awslabs/operatorpkg ``status``)
condition sets keep them, with the root ``Ready``. ``nodeclass_status`` / ``nodepool_status``
(pure): an EC2NodeClass's and a NodePool's status from what was resolved. ``resolver``: one
EC2NodeClass's selector terms through the AWS adapter. ``status_loop``: the reconcile loop (watch,
periodic resync, retries, status writes only on change). ``catalog_refresh``: the instance type
catalog and prices kept fresh, retried with backoff when AWS fails.
"""
