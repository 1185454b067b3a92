"""kubespot: run Kubernetes on spot capacity cheaply and without losing service."""

__version__ = "0.1.0"
