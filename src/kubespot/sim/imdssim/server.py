"""ImdsSim: the aiohttp server that serves a simulated fleet's metadata, plus its control endpoint.

Addressing: the first instance answers at the root (``/latest/...``, as on an EC2 host); every
instance also answers under ``/<instance-id>/latest/...``; with ``instance_ports=True`` each one
also gets a listener of its own whose root is that instance (for clients that cannot add a path).
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Awaitable, Callable, Iterable
from types import TracebackType

from aiohttp import web

from kubespot.sim.imdssim.clock import Clock, system_clock
from kubespot.sim.imdssim.control import CONTROL_PREFIX, make_control_app
from kubespot.sim.imdssim.faults import Fault
from kubespot.sim.imdssim.fleet import Fleet
from kubespot.sim.imdssim.imds_http import ImdsResponder
from kubespot.sim.imdssim.instance import SimInstance
from kubespot.sim.imdssim.responses import imds_error
from kubespot.sim.imdssim.scenario import Scenario, apply_scenario

_log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 1338


class ImdsSim:
    """A metadata service for many simulated instances on one address.

    Use ``async with ImdsSim(...) as sim`` (or ``start()``/``stop()``); for synchronous callers see
    ``kubespot.sim.imdssim.thread.ImdsSimThread``. ``port=0`` picks a free port.
    """

    def __init__(
        self,
        instances: Iterable[SimInstance] = (),
        *,
        host: str = DEFAULT_HOST,
        port: int = 0,
        clock: Clock = system_clock,
        require_v2: bool = False,
        faults: Iterable[Fault] = (),
        instance_ports: bool = False,
        rng: Callable[[], float] | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.instance_ports = instance_ports
        self._fleet = Fleet(instances, clock=clock, require_v2=require_v2, rng=rng)
        for fault in faults:
            self._fleet.faults.add(fault)
        self._runner: web.AppRunner | None = None
        self._bound_port: int | None = None
        self._instance_sites: dict[str, tuple[web.SockSite, int]] = {}
        self._port_owner: dict[int, str] = {}
        self._closing = asyncio.Event()
        self._responder: ImdsResponder | None = None

    @classmethod
    def from_scenario(
        cls,
        scenario: Scenario,
        *,
        host: str = DEFAULT_HOST,
        port: int = 0,
        clock: Clock = system_clock,
        instance_ports: bool = False,
        rng: Callable[[], float] | None = None,
    ) -> ImdsSim:
        """A server whose fleet, faults and require-v2 come from ``scenario``; times count from now."""
        sim = cls(host=host, port=port, clock=clock, instance_ports=instance_ports, rng=rng)
        apply_scenario(sim.fleet, scenario)
        return sim

    @property
    def fleet(self) -> Fleet:
        """The simulation state: fire events, set faults, move instances in and out."""
        return self._fleet

    # --- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        if self._runner is not None:
            raise RuntimeError("ImdsSim already started")
        self._closing = asyncio.Event()
        app = web.Application(middlewares=[self._never_crash])
        app.add_subapp(CONTROL_PREFIX, make_control_app(self))
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._responder = ImdsResponder(self._fleet, self._closing)
        # Short shutdown grace: hung "timeout" requests are released by _closing, nothing else lingers.
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0, handle_signals=False)
        await runner.setup()
        self._runner = runner
        try:
            sock, self._bound_port = _listen(self.host, self.port)
            await web.SockSite(runner, sock).start()
            if self.instance_ports:
                for instance in self._fleet.instances():
                    await self._bind_instance_port(instance.instance_id)
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        self._closing.set()
        runner, self._runner = self._runner, None
        self._bound_port = None
        self._instance_sites.clear()
        self._port_owner.clear()
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> ImdsSim:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    # --- addresses ---------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """Root URL (the first instance's metadata at ``/latest/...``), without a trailing slash."""
        if self._bound_port is None:
            raise RuntimeError("ImdsSim is not started")
        return f"http://{_url_host(self.host)}:{self._bound_port}"

    @property
    def control_url(self) -> str:
        return self.url + CONTROL_PREFIX

    def instance_url(self, instance_id: str) -> str:
        """Base URL for one instance (append ``/latest/meta-data/...``)."""
        self._fleet.get(instance_id)
        return f"{self.url}/{instance_id}"

    def instance_port_url(self, instance_id: str) -> str | None:
        """The instance's own listener, when ``instance_ports`` is on."""
        bound = self._instance_sites.get(instance_id)
        return None if bound is None else f"http://{_url_host(self.host)}:{bound[1]}"

    def urls_for(self, instance_id: str) -> dict[str, str]:
        urls = {"base": self.instance_url(instance_id)}
        default = self._fleet.default
        if default is not None and default.instance_id == instance_id:
            urls["root"] = self.url
        if (own := self.instance_port_url(instance_id)) is not None:
            urls["port"] = own
        return urls

    # --- fleet changes that touch listeners -------------------------------------------------------

    async def add_instance(self, instance: SimInstance) -> SimInstance:
        self._fleet.add(instance)
        if self.instance_ports and self._runner is not None:
            try:
                await self._bind_instance_port(instance.instance_id)
            except OSError:
                self._fleet.remove(instance.instance_id)
                raise
        return instance

    async def remove_instance(self, instance_id: str) -> None:
        self._fleet.remove(instance_id)
        bound = self._instance_sites.pop(instance_id, None)
        if bound is not None:
            self._port_owner.pop(bound[1], None)
            await bound[0].stop()

    async def _bind_instance_port(self, instance_id: str) -> None:
        assert self._runner is not None
        # With a fixed base port, instance k listens on base+1+k so game-day URLs are predictable.
        port = 0 if self.port == 0 else self.port + 1 + len(self._instance_sites)
        sock, bound_port = _listen(self.host, port)
        site = web.SockSite(self._runner, sock)
        await site.start()
        self._instance_sites[instance_id] = (site, bound_port)
        self._port_owner[bound_port] = instance_id

    # --- request dispatch --------------------------------------------------------------------------

    @web.middleware
    async def _never_crash(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        try:
            return await handler(request)
        except web.HTTPException as exc:
            return imds_error(exc.status)
        except Exception:
            _log.exception("imdssim failed on %s %s", request.method, request.path)
            return imds_error(500)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        owner = self._owner_of_local_port(request)
        if owner is not None:
            instance = self._fleet.get(owner) if owner in self._fleet else None
            rel = path
        else:
            instance, rel = self._route(path)
        if instance is None or self._responder is None:
            return imds_error(404)
        return await self._responder.respond(request, instance, rel)

    def _route(self, path: str) -> tuple[SimInstance | None, str]:
        _, _, rest = path.partition("/")
        first, slash, tail = rest.partition("/")
        if first.startswith("i-"):
            if first not in self._fleet:
                return None, path
            return self._fleet.get(first), "/" + tail if slash else "/"
        return self._fleet.default, path

    def _owner_of_local_port(self, request: web.Request) -> str | None:
        if not self._port_owner or request.transport is None:
            return None
        sockname = request.transport.get_extra_info("sockname")
        if not isinstance(sockname, tuple) or len(sockname) < 2:
            return None
        return self._port_owner.get(sockname[1])


def _listen(host: str, port: int) -> tuple[socket.socket, int]:
    """A bound socket and its port; binding here (not in aiohttp) tells us the port chosen for 0."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock, int(sock.getsockname()[1])


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
