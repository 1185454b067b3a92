"""User data of the three families, shaped as Karpenter writes them (launching-research.md §3.2)."""

from __future__ import annotations

_KARPENTER_LABELS = (
    "karpenter.sh/capacity-type=spot,karpenter.sh/do-not-sync-taints=true,"
    "karpenter.sh/nodepool=default,team=checkout"
)
_AL2_EXTRA_ARGS = (
    '--node-labels="karpenter.sh/capacity-type=on-demand,karpenter.sh/nodepool=db" '
    '--register-with-taints="karpenter.sh/unregistered:NoExecute,db=only:NoSchedule" --max-pods=20'
)

AL2023_MIME = f"""MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="//"

--//
Content-Type: text/x-shellscript; charset="us-ascii"

#!/bin/bash
echo "custom part kept by Karpenter"

--//
Content-Type: application/node.eks.aws

apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  kubelet:
    flags:
    - --node-labels=team=payments
--//
Content-Type: application/node.eks.aws

# Karpenter Generated NodeConfig
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
metadata: {{}}
spec:
  cluster:
    apiServerEndpoint: https://demo.example
    certificateAuthority: Q0E=
    cidr: 10.100.0.0/16
    name: demo
  kubelet:
    config:
      clusterDNS:
      - 10.100.0.10
      maxPods: 17
      registerWithTaints:
      - effect: NoExecute
        key: karpenter.sh/unregistered
      - effect: NoSchedule
        key: dedicated
        value: payments
    flags:
    - --node-labels="{_KARPENTER_LABELS}"
--//--
"""

AL2_SCRIPT = f"""MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="//"

--//
Content-Type: text/x-shellscript; charset="us-ascii"

#!/bin/bash -xe
exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1
/etc/eks/bootstrap.sh 'demo' --apiserver-endpoint 'https://demo.example' --b64-cluster-ca 'Q0E=' \\
--dns-cluster-ip '10.100.0.10' \\
--use-max-pods false \\
--kubelet-extra-args '{_AL2_EXTRA_ARGS}'
--//--
"""

BOTTLEROCKET_TOML = """[settings.kubernetes]
api-server = "https://demo.example"
cluster-certificate = "Q0E="
cluster-name = "demo"
max-pods = 11

[settings.kubernetes.node-labels]
"karpenter.sh/capacity-type" = "spot"
"karpenter.sh/nodepool" = "br"

[settings.kubernetes.node-taints]
"karpenter.sh/unregistered" = [":NoExecute"]
"gpu" = ["true:NoSchedule", "true:NoExecute"]
"""
