"""Karpenter's v1 API read once: NodePool, NodeClaim and EC2NodeClass objects (dicts, as the API
server returns them) into frozen specs with Karpenter's defaults, their validation as status
conditions, and the conversion of the old API names (v1alpha5, v1alpha1, v1beta1) to v1.

Pure (imports only ``kubespot.model``, ``kubespot.config`` and ``kubespot.scheduling``): no I/O.
"""
