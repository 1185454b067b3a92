"""kubespot's settings: one dataclass per concern, each field documented, loaded in one place.

Every field is declared with ``setting(...)`` (see ``base``) so its environment variable, the name
aws-node-termination-handler uses for it (accepted as an alias), unit and documentation travel with
it; the loader and the generated configuration reference read the same metadata.
"""
