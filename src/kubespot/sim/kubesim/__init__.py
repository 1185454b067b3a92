"""kubesim: a Kubernetes API server simulator with the controllers a cluster would run.

Real clients (kubectl, the official Python client, lightkube) talk to it over HTTP/JSON.
"""
