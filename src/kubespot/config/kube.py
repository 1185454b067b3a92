"""How kubespot reaches the Kubernetes API: where the credentials come from, how fast it may call.

Read by ``kubespot.kube.connect``; the loader composes this group with the others.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import setting
from .loader import InvalidSetting


@dataclass(frozen=True, kw_only=True)
class KubeSettings:
    """Connection and client-side rate limits for the Kubernetes API."""

    kubeconfig: str = setting(
        "",
        doc=(
            "Path of a kubeconfig file. Empty: in-cluster service account when running in a pod, "
            "else $KUBECONFIG, else ~/.kube/config (the order kubectl and client-go use)."
        ),
        env="KUBESPOT_KUBECONFIG",
        flag="--kubeconfig",
    )
    context: str = setting(
        "",
        doc="Context of the kubeconfig to use. Empty: its current-context.",
        env="KUBESPOT_KUBE_CONTEXT",
        flag="--context",
    )
    qps: float = setting(
        50.0,
        doc=(
            "Sustained requests per second this process sends to the API server (client-side token "
            "bucket; 0 disables it). The reference handler's 5 (client-go's default) is too low for "
            "its own job: draining a 110-pod node needs about 110 evictions, 110 pod events and the "
            "retries of PDB-blocked pods inside a 2-minute notice, and at 5/s the evictions alone "
            "take 22 s; its queue mode left nodes untainted under 50 simultaneous interruptions for "
            "this reason. 50/s keeps a full drain within a few seconds of API time while staying far "
            "below what API Priority and Fairness grants one workload-high client."
        ),
        env="KUBESPOT_KUBE_API_QPS",
        nth="KUBE_API_QPS",
        unit="requests/second",
    )
    burst: int = setting(
        100,
        doc=(
            "Requests that may be sent at once above the sustained rate (token bucket size). 100 lets "
            "the first wave of a drain (taint, cordon, one eviction per pod of a typical node) leave "
            "without waiting; the reference handler's default is 10."
        ),
        env="KUBESPOT_KUBE_API_BURST",
        nth="KUBE_API_BURST",
        unit="requests",
    )
    request_timeout: float = setting(
        10.0,
        doc=(
            "Seconds to wait for one API response (connect, read, write). A watch's reads are "
            "bounded by watch_idle_timeout instead. 10 s is lightkube's default; a call that takes "
            "longer is retried, and the drain deadline bounds the total."
        ),
        env="KUBESPOT_KUBE_REQUEST_TIMEOUT",
        unit="seconds",
    )
    watch_idle_timeout: float = setting(
        75.0,
        doc=(
            "Seconds a watch may go without a word from the API server (an event, a bookmark, the "
            "server ending it) before it is taken as broken: the connection is dropped, the "
            "objects re-listed and the watch resumed. A half-open connection (a control-plane "
            "upgrade or a NAT entry reset with no FIN or RST) otherwise freezes a watch for ever. "
            "Watches ask the server to end them after 60 s (or 4/5 of this bound if shorter) and "
            "for bookmarks, so a live watch always speaks within it; 75 s is that 60 s plus a "
            "margin, near kopf's 70 s watch inactivity timeout. /healthz turns red when a watch has "
            "been silent for twice this long (it kept failing to come back)."
        ),
        env="KUBESPOT_KUBE_WATCH_IDLE_TIMEOUT",
        unit="seconds",
    )
    retry_attempts: int = setting(
        5,
        doc=(
            "Attempts for one API call failing with 409 (plain patches), 429 (except evictions), 500, "
            "503, 504 or a transport error, with exponential backoff and jitter between them. An "
            "eviction's 429 is never retried here: the drain engine tells a PodDisruptionBudget's "
            "refusal from the API server's throttling and waits the Retry-After of the latter."
        ),
        env="KUBESPOT_KUBE_RETRY_ATTEMPTS",
        unit="attempts",
    )

    def __post_init__(self) -> None:
        if self.qps < 0:
            raise InvalidSetting("qps", f"must be >= 0, got {self.qps}")
        if self.burst < 1:
            raise InvalidSetting("burst", f"must be >= 1, got {self.burst}")
        if self.request_timeout <= 0:
            raise InvalidSetting("request_timeout", f"must be > 0, got {self.request_timeout}")
        if self.watch_idle_timeout < 2:
            raise InvalidSetting(
                "watch_idle_timeout",
                f"must be >= 2 (the server's shortest watch is 1 s), got {self.watch_idle_timeout}",
            )
        if self.retry_attempts < 1:
            raise InvalidSetting("retry_attempts", f"must be >= 1, got {self.retry_attempts}")
