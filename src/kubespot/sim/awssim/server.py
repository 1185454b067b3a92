"""Run moto's threaded server on loopback as kubespot's AWS stand-in.

``MotoServer`` starts moto's ``ThreadedMotoServer`` in this process (a werkzeug server on a daemon
thread), installs kubespot's extensions to moto (see ``kubespot.sim.awssim.extensions``) and hands
out what a client needs: endpoint URL, fake credentials, region, environment variables for a child
process and ready-made boto3 clients.

Because the server runs in-process, tests can also reach moto's backends directly (the lifecycle
action helpers use that). A child process (the sandbox's agent or controller) only sees HTTP, so
the helper also serves a few JSON admin routes under ``/_kubespot/`` (see ``admin.py``).
"""

from __future__ import annotations

import logging
import os
import threading
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, overload

import boto3
from botocore.config import Config
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.moto_server.threaded_moto_server import ThreadedMotoServer
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import make_server

from kubespot.sim.awssim import admin, extensions
from kubespot.sim.awssim.extensions import lifecycle, market, pricing, reclaims, spot_prices

if TYPE_CHECKING:
    from mypy_boto3_autoscaling import AutoScalingClient
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_elbv2 import ElasticLoadBalancingv2Client
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_sns import SNSClient
    from mypy_boto3_sqs import SQSClient

__all__ = ["DEFAULT_REGION", "FAKE_ACCESS_KEY_ID", "FAKE_SECRET_ACCESS_KEY", "MotoServer"]

DEFAULT_REGION = "us-east-1"
FAKE_ACCESS_KEY_ID = "testing"
FAKE_SECRET_ACCESS_KEY = "testing"  # moto accepts any credentials

_WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class _Server(ThreadedMotoServer):
    """moto's threaded server with kubespot's admin routes in front of moto's WSGI app."""

    def __init__(self, host: str, port: int, region: str) -> None:
        super().__init__(ip_address=host, port=port, verbose=False)
        self._region = region

    def _server_entry(self) -> None:
        app: _WSGIApp = DomainDispatcherApplication(create_backend_app)
        # The Pricing API (which moto lacks) is answered before moto sees the request.
        wrapped = admin.AdminMiddleware(pricing.PricingMiddleware(app), default_region=self._region)
        # threaded=True also makes werkzeug speak HTTP/1.1, so boto3 keeps connections alive.
        self._server = make_server(
            self._ip_address, self._port, wrapped, True, request_handler=MotoRequestHandler
        )
        self._server_ready_event.set()
        self._server.serve_forever()


class MotoServer:
    """moto in server mode on ``host`` (127.0.0.1) and a free port, with kubespot's extensions.

    Use as a context manager or call ``start()`` / ``stop()``. ``reset()`` wipes all AWS state
    (queues, instances, groups, recorded lifecycle completions) but keeps the server and the
    extensions' configuration (spot price table).
    """

    def __init__(
        self,
        *,
        port: int = 0,
        host: str = "127.0.0.1",
        region: str = DEFAULT_REGION,
        install_extensions: bool = True,
        ondemand_prices: Mapping[str, float] | Path | str | None = None,
        quiet: bool = True,
        reset_on_start: bool = True,
    ) -> None:
        """Prepare a server; nothing listens until ``start()``.

        ``port=0`` picks a free port. ``install_extensions=False`` runs stock moto (the SQS
        benchmark uses it for its baseline figure). ``ondemand_prices`` (a mapping of instance
        type to USD/hour, or a JSON file shaped like ``aws-ondemand-prices.json``) feeds the
        spot price extension; without it the file named by ``KUBESPOT_ONDEMAND_PRICES`` is used
        if set, else moto's placeholder price stays.

        moto keeps its state in process-wide backends: servers in one process share it, and
        ``reset_on_start`` (default) wipes what an earlier server in the process left behind.
        """
        self.host = host
        self.region = region
        self.account_id: str = DEFAULT_ACCOUNT_ID
        self.access_key_id = FAKE_ACCESS_KEY_ID
        self.secret_access_key = FAKE_SECRET_ACCESS_KEY
        self._requested_port = port
        self._install_extensions = install_extensions
        self._ondemand_prices = ondemand_prices
        self._quiet = quiet
        self._reset_on_start = reset_on_start
        self._server: _Server | None = None
        self._port: int | None = None
        self._session: boto3.session.Session | None = None
        self._session_lock = threading.RLock()
        self._sqs: SQSClient | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> MotoServer:
        """Install the extensions (idempotent), start listening, return self."""
        if self._server is not None:
            return self
        if self._quiet:
            # werkzeug logs one line per request: noise in tests and a cost in benchmarks.
            logging.getLogger("werkzeug").setLevel(logging.WARNING)
        if self._install_extensions:
            extensions.install_all()
            prices = self._ondemand_prices or os.environ.get("KUBESPOT_ONDEMAND_PRICES")
            # Without a table of their own, spot prices derive from the packaged on-demand table.
            spot_prices.configure(prices or None, region=self.region)
        server = _Server(self.host, self._requested_port, self.region)
        server.start()
        self._server = server
        if self._install_extensions:
            # Timed spot reclaims (terminations two minutes after the warning) run on this thread.
            reclaims.start_ticker()
        self._port = int(server.get_host_and_port()[1])
        self._sqs = None
        if self._reset_on_start:
            # moto's backends are process-wide: a server started after another one in the same
            # process would otherwise inherit its queues and instances.
            self.reset()
        return self

    def stop(self) -> None:
        """Stop listening and join the server thread. Safe to call twice."""
        if self._server is None:
            return
        self._server.stop()
        self._server = None
        if self._install_extensions:
            reclaims.stop_ticker()

    def __enter__(self) -> MotoServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._server is not None

    def reset(self) -> None:
        """Forget every AWS resource (moto's ``/moto-api/reset``), keeping the server running."""
        request = urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()

    # -- connection details ----------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("MotoServer is not started")
        return self._port

    @property
    def endpoint_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def env(self) -> dict[str, str]:
        """Environment variables that point an AWS SDK (boto3, the AWS CLI, Go SDK) at this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": self.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret_access_key,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_REGION": self.region,
        }

    def session(self) -> boto3.session.Session:
        """The boto3 session clients are made from (shared: it caches service models)."""
        with self._session_lock:
            if self._session is None:
                self._session = boto3.session.Session(
                    aws_access_key_id=self.access_key_id,
                    aws_secret_access_key=self.secret_access_key,
                    region_name=self.region,
                )
            return self._session

    @overload
    def client(self, service: Literal["sqs"], *, max_pool_connections: int = ...) -> SQSClient: ...
    @overload
    def client(self, service: Literal["ec2"], *, max_pool_connections: int = ...) -> EC2Client: ...
    @overload
    def client(
        self, service: Literal["autoscaling"], *, max_pool_connections: int = ...
    ) -> AutoScalingClient: ...
    @overload
    def client(
        self, service: Literal["elbv2"], *, max_pool_connections: int = ...
    ) -> ElasticLoadBalancingv2Client: ...
    @overload
    def client(self, service: Literal["sns"], *, max_pool_connections: int = ...) -> SNSClient: ...
    @overload
    def client(self, service: Literal["events"], *, max_pool_connections: int = ...) -> EventBridgeClient: ...
    @overload
    def client(self, service: str, *, max_pool_connections: int = ...) -> Any: ...

    def client(self, service: str, *, max_pool_connections: int = 10) -> Any:
        """A boto3 client for ``service`` aimed at this server.

        Retries are limited to a single attempt: moto answers HTTP 500 for calls it does not
        implement and boto would otherwise retry those with back-off, turning a clear failure
        into a slow test.
        """
        config = Config(
            retries={"total_max_attempts": 1, "mode": "standard"},
            max_pool_connections=max_pool_connections,
            connect_timeout=5,
            read_timeout=60,
        )
        session = self.session()
        # A boto3 session is not thread-safe while it builds clients; the clients themselves are.
        with self._session_lock:
            return session.client(  # type: ignore[call-overload]
                service, endpoint_url=self.endpoint_url, region_name=self.region, config=config
            )

    def queue_counts(self, queue_url: str) -> tuple[int, int]:
        """(visible, in flight) messages on a queue, without moto's blind spot.

        moto computes the two counts one after the other against the clock, so a message whose
        visibility lapses between them is in neither and a non-empty queue can read as empty.
        A lapse happens at one instant: of two reads, the larger is right (or merely stale).
        """
        if self._sqs is None:
            self._sqs = self.client("sqs")
        sqs = self._sqs
        names: Any = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        reads = []
        for _ in range(2):
            attrs = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=names)["Attributes"]
            visible = int(attrs["ApproximateNumberOfMessages"])
            reads.append((visible, int(attrs["ApproximateNumberOfMessagesNotVisible"])))
        return max(reads, key=sum)

    # -- extension accessors ---------------------------------------------------------------------

    def lifecycle_actions(self) -> list[lifecycle.LifecycleAction]:
        """Every lifecycle action started in this server's region, with completions and heartbeats."""
        return lifecycle.list_actions(self.account_id, self.region)

    def inject_lifecycle_fault(self, operation: str, code: str, *, times: int = 1) -> None:
        """Fail the next ``times`` calls of a lifecycle ``operation`` with AWS error ``code``
        (``Throttling``, ``AccessDeniedException``); see ``extensions.lifecycle.inject_fault``."""
        lifecycle.inject_fault(self.account_id, self.region, operation, code, times=times)

    def start_lifecycle_action(
        self,
        auto_scaling_group_name: str,
        instance_id: str,
        *,
        lifecycle_hook_name: str | None = None,
        transition: str = lifecycle.TERMINATING,
        emit: bool = True,
        decrement_desired_capacity: bool = False,
    ) -> lifecycle.LifecycleAction:
        """Put an instance of a group into ``Terminating:Wait`` (or ``Pending:Wait``) as AWS would.

        See ``kubespot.sim.awssim.extensions.lifecycle.start_action`` for the details; with
        ``emit`` the EventBridge event and the hook's notification-target message are sent.
        """
        return lifecycle.start_action(
            self.account_id,
            self.region,
            auto_scaling_group_name,
            instance_id,
            lifecycle_hook_name=lifecycle_hook_name,
            transition=transition,
            emit=emit,
            decrement_desired_capacity=decrement_desired_capacity,
        )

    # -- spot market (extensions.market, .fleet, .reclaims) -------------------------------------

    def set_pool_capacity(
        self,
        capacity: int | None,
        *,
        capacity_type: str = "*",
        instance_type: str = "*",
        zone: str = "*",
    ) -> list[dict[str, Any]]:
        """Let the capacity pools matching the ``fnmatch`` patterns hold ``capacity`` instances
        (None: unlimited, the default); see ``extensions.market.set_capacity``."""
        return market.set_capacity(
            self.account_id,
            self.region,
            capacity,
            capacity_type=capacity_type,
            instance_type=instance_type,
            zone=zone,
        )

    def pool_stats(self) -> dict[str, Any]:
        """Every pool the market knows: capacity, used, free, launches, errors, reclaimed, band."""
        reclaims.run_due(self._ec2_backend())
        return market.pools(self.account_id, self.region)

    def fleet_call_log(self) -> list[dict[str, Any]]:
        """Every CreateFleet ``instant`` call with its start and end times, launches and errors."""
        return market.fleet_call_log(self.account_id, self.region)

    def hold_fleet_answers(self, seconds: float, *, times: int = 1) -> None:
        """The next ``times`` CreateFleet ``instant`` calls launch at once and answer ``seconds``
        later (a client killed meanwhile never learns its instances); ``times=0`` drops the holds
        not used yet. See ``extensions.market.hold_answers``."""
        market.hold_answers(self.account_id, self.region, seconds, times=times)

    def reclaim_spot(
        self,
        zone: str,
        instance_type: str | None = None,
        *,
        rebalance: bool = False,
        rebalance_lead_s: float = 0.0,
        delay_s: float | None = None,
        capacity_after: int = 0,
    ) -> reclaims.Reclaim:
        """Reclaim a spot pool (``instance_type`` in ``zone``) or every spot pool of ``zone``;
        see ``extensions.reclaims.reclaim``."""
        return reclaims.reclaim(
            self.account_id,
            self.region,
            zone=zone,
            instance_type=instance_type,
            rebalance=rebalance,
            rebalance_lead_s=rebalance_lead_s,
            delay_s=delay_s,
            capacity_after=capacity_after,
        )

    def spot_reclaims(self) -> list[dict[str, Any]]:
        """Every reclaim so far, with the instances warned and terminated."""
        return reclaims.list_reclaims(self.account_id, self.region)

    def set_market_time_scale(self, scale: float) -> None:
        """Multiply the market's default delays (the two-minute warning) by ``scale``."""
        market.set_time_scale(self.account_id, self.region, scale)

    def set_interruption_band(self, band: int | str, *, instance_type: str = "*", zone: str = "*") -> None:
        """Put the matching spot pools in a Spot-Advisor band (``"<5%"`` … ``">20%"`` or 0-4)."""
        market.set_interruption_band(
            self.account_id, self.region, band, instance_type=instance_type, zone=zone
        )

    def interruption_rates(
        self, instance_types: list[str] | None = None, zones: list[str] | None = None
    ) -> list[dict[str, Any]]:
        """The interruption band of the known spot pools, or of the (types by zones) asked for."""
        return market.interruption_rates(
            self.account_id, self.region, instance_types=instance_types, zones=zones
        )

    def _ec2_backend(self) -> Any:
        from moto.ec2.models import ec2_backends

        return ec2_backends[self.account_id][self.region]
