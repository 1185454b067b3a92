"""Signal sources: each subpackage watches one kind of input and only produces ``InterruptionEvent``s.

A source never acts on what it sees (no Kubernetes, no AWS calls beyond reading its input); it hands
normalized events with stable ids to a sink given by the caller, and handling does the rest.
"""
