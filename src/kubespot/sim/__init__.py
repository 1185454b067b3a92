"""Simulators shipped with kubespot: kubesim (Kubernetes API), imdssim (EC2 IMDS), awssim (moto).

They stand in for the real Kubernetes and AWS on machines that cannot reach either. Product code
never imports this package, and this package never imports product code: both sides meet only on
the wire (HTTP), exactly as in production.
"""
