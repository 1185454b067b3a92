"""The elected replica's cluster-wide duties: deleting Nodes left behind by terminated instances,
and the managed-instances gauge."""
