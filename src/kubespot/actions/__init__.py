"""Actions: what kubespot does to the cluster in response to an interruption (drain, node changes...).

Actions consume settings and the adapters (``kubespot.kube``); they never import event sources.
"""
