"""Windows user data: one PowerShell block running ``Start-EKSBootstrap.ps1`` (pure).

As aws/karpenter-provider-aws ``pkg/providers/amifamily/bootstrap/windows.go`` (``Windows.Script``) and
the golden file ``pkg/providers/launchtemplate/testdata/windows_userdata_merged.golden``: the user's
``spec.userData`` goes inside the block, before the bootstrap call, unparsed. kubespot renders it so a
Windows EC2NodeClass gets what Karpenter would give it; whether kubespot launches Windows nodes is
the launch path's decision.
"""

from __future__ import annotations

from .userdata_options import BootstrapOptions, kubelet_extra_args

__all__ = ["render_windows"]


def render_windows(opts: BootstrapOptions) -> str:
    c, k = opts.cluster, opts.kubelet
    out = ["<powershell>\n"]
    if opts.custom:
        out.append(opts.custom + "\n")
    out.append('[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1"\n')
    out.append(f"& $EKSBootstrapScriptFile -EKSClusterName '{c.name}' -APIServerEndpoint '{c.endpoint}'")
    if c.ca_bundle:
        out.append(f" -Base64ClusterCA '{c.ca_bundle}'")
    if args := kubelet_extra_args(opts):
        out.append(" -KubeletExtraArgs '" + " ".join(args) + "'")
    if k.cluster_dns:
        out.append(f" -DNSClusterIP '{k.cluster_dns[0]}'")
    out.append("\n</powershell>")
    return "".join(out)
