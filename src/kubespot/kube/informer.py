"""Informers: the objects of a resource kept in memory by one LIST and one WATCH, as client-go's.

A controller that reads the cluster on every pass (the provisioner: every pod, node and NodeClaim)
pays a fresh LIST per pass, and the API server pays it too. Karpenter reads all of it from
controller-runtime's informer cache instead; ``Informer`` is that cache for one resource path,
following client-go (``k8s.io/client-go/tools/cache``):

- ``reflector.go`` ``ListAndWatch``: a paged LIST (``KubeClient.list_versioned``), then a WATCH
  from the list's resourceVersion with ``allowWatchBookmarks`` (``KubeClient._watch``: bookmarks
  move the version on, an ended watch is resumed from it, a watch silent past the client's idle
  bound is a half-open connection and is dropped). A 410 Gone, a broken watch or a silent one is
  answered with a fresh LIST (the reflector's ``relist`` on ``Expired``), backed off with the
  shared helper (``model.backoff``); throttling (429) and server errors (5xx) on the LIST are
  retried by the client, then here with backoff, never raised to the readers.
- ``delta_fifo.go`` ``Replace``: a re-list replaces the contents; an object missing from it was
  deleted meanwhile and is reported so (client-go's ``DeletedFinalStateUnknown``).
- ``shared_informer.go``: ``synced`` (``HasSynced``) is set once the first LIST is in and stays
  set; the handlers (``subscribe``) are told every add, update and delete, and every object of a
  re-list.

Reads are cheap: ``items()`` hands out the stored dicts themselves (decoded once from the wire,
never copied) in a tuple rebuilt only after a change. Nobody may mutate them: a writer builds a new
dict, as client-go's cache requires of its readers.

A resource the server does not serve (a CRD not installed: 404) reads as empty and synced (with
``served`` False, for readers to whom empty is not "none"), and is listed again (backed off up to
``unserved_retry`` seconds) until it is served. A re-list answered 404 after the store was filled
keeps the store as it was and tells no handler anything (reflector.go ``list``: only a successful
LIST replaces the store); ``served`` goes False meanwhile, so a reader that acts on an object's
absence (NodeClaim garbage collection, an EC2NodeClass's finalization) waits.

Health (``Informers.behind``): an informer that has not been in step with the server (its first LIST
not in, or its watch broken and the re-list not through) for longer than the limit fails
``/healthz``; a watch that is running but silent is the client's ``watches`` check already. A LIST
answered 404 is not "behind": the server answered, and what it says (not served) stays true until a
CRD is installed, which no restart does. So a CRD missing at start or removed at runtime leaves the
process running, its readers waiting (``wait_served``, ``served``) and the warning logged, and it
goes on by itself once the CRD is served. controller-runtime refuses to start without its CRDs (its
cache never syncs) but keeps running, its reflector logging list errors, when one goes at runtime;
kubespot takes the latter for both, as the chart may install CRDs after the operator.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, cast

from ..model.backoff import equal_jitter
from .client import KubeClient
from .custom import ObjectList

__all__ = ["Handler", "Informer", "Informers", "key_of"]

log = logging.getLogger("kubespot.kube.informer")

Obj = dict[str, Any]
#: ``handler(op, obj)``: op is ADDED, MODIFIED or DELETED; ``obj`` is the stored dict (read only).
#: Called synchronously from the informer's task: it must return at once and not raise.
Handler = Callable[[str, Obj], None]

#: Backoff between failed LISTs (each one already a call with the client's own retries), seconds.
LIST_BASE = 0.5
LIST_CAP = 10.0
#: Failures this far apart start the re-list backoff afresh (client-go reflector.go: its backoff
#: manager resets after 2 minutes without a failure).
BACKOFF_RESET = 120.0
#: Seconds between LISTs of a resource the server does not serve (its CRD not installed).
UNSERVED_RETRY = 10.0


def key_of(obj: Mapping[str, Any]) -> str:
    """``namespace/name``, or ``name`` for a cluster-scoped object (client-go's
    ``MetaNamespaceKeyFunc``)."""
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or "")
    namespace = meta.get("namespace")
    return f"{namespace}/{name}" if namespace else name


def _same(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """The same version of an object (a re-list's copy of what the watch already brought)."""
    a = (old.get("metadata") or {}).get("resourceVersion")
    return bool(a) and a == (new.get("metadata") or {}).get("resourceVersion")


class Informer:
    """One resource path's objects, kept current until cancelled (``run``, or ``start``)."""

    def __init__(
        self,
        kube: KubeClient,
        path: str,
        *,
        unserved_retry: float = UNSERVED_RETRY,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._kube = kube
        self.path = path.strip("/")
        self._objects: dict[str, Obj] = {}
        self._items: tuple[Obj, ...] | None = ()
        self._handlers: list[Handler] = []
        self._unserved_retry = unserved_retry
        self._monotonic = monotonic
        #: Set once the first LIST is in (client-go's ``HasSynced``); stays set across re-lists.
        self.synced = asyncio.Event()
        #: Set while ``served`` is True (``wait_served``).
        self._served = asyncio.Event()
        self._served.set()
        #: Monotonic time since which the cache has not been in step with the server (None: in step).
        self.behind_since: float | None = None
        #: LISTs made (the first and every re-list), for tests and logs.
        self.lists = 0
        #: Bumped on every change (an add, update or delete, or a re-list that changed anything).
        self.generation = 0
        self._task: asyncio.Task[None] | None = None

    # -- reading ----------------------------------------------------------------------------------

    def items(self) -> tuple[Obj, ...]:
        """Every object as last seen (the stored dicts: read, never mutate)."""
        if self._items is None:
            self._items = tuple(self._objects.values())
        return self._items

    def get(self, key: str) -> Obj | None:
        """The object ``namespace/name`` (``name`` when cluster-scoped), or None."""
        return self._objects.get(key)

    def __len__(self) -> int:
        return len(self._objects)

    @property
    def served(self) -> bool:
        """False while the last LIST was answered 404 (a CRD not installed, or not ready yet): the
        store is then empty (nothing was ever listed) or as the last served LIST left it."""
        return self._served.is_set()

    @served.setter
    def served(self, value: bool) -> None:
        if value:
            self._served.set()
        else:
            self._served.clear()

    def subscribe(self, handler: Handler) -> Callable[[], None]:
        """Tell ``handler`` of every change from now on; returns the function that unsubscribes."""
        self._handlers.append(handler)

        def unsubscribe() -> None:
            if handler in self._handlers:
                self._handlers.remove(handler)

        return unsubscribe

    async def wait_synced(self) -> None:
        """Start the informer if nobody runs it, and return once its first LIST is in."""
        self.start()
        await self.synced.wait()

    async def wait_served(self) -> None:
        """``wait_synced``, and then until the last LIST was served: for a reader that writes from
        the store as a whole (a status, a count), a store filled by no served LIST (a 404: a CRD
        not installed or its handler not ready) is not synced. controller-runtime's cache never
        answers a read from a list that failed (``informer_cache.go``: it waits for
        ``WaitForCacheSync``), and Karpenter's ``state.Cluster.Synced`` is false on a list error."""
        while True:
            await self.wait_synced()
            await self._served.wait()
            if self.synced.is_set():
                return

    # -- running ----------------------------------------------------------------------------------

    def start(self) -> None:
        """Run the informer in a task of its own, unless it runs already."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._loop(), name=f"informer {self.path}")

    async def stop(self) -> None:
        """Stop following the server and drop the cache (a replica that stops leading keeps no copy
        of the cluster, as a stopped controller-runtime cache is dropped with its manager); until
        started again it is not in sync. The handlers are not told: their owners stop with it."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        self.synced.clear()
        if self._objects:
            self._objects = {}
            self._changed()
        self._items = ()

    async def run(self) -> None:
        """Keep the cache current until cancelled (the task ``start`` makes, if any, is reused)."""
        self.start()
        assert self._task is not None
        try:
            await asyncio.shield(self._task)
        finally:
            await self.stop()

    async def _loop(self) -> None:
        self.behind_since = self._monotonic()
        attempt, failed_at = 0, 0.0
        try:
            while True:
                try:
                    await self._follow()
                except Exception as err:  # the reflector never ends (reflector.go Run)
                    now = self._monotonic()
                    if attempt and now - failed_at > BACKOFF_RESET:
                        attempt = 0  # a blip after a quiet spell starts the backoff afresh
                    failed_at = now
                    # Anything the follow did not expect (a garbled answer, a bug): the cache is not
                    # in step until a LIST is through again, so /healthz says so meanwhile.
                    self.behind_since = self.behind_since or self._monotonic()
                    log.warning(
                        "informer %s: following failed (%s: %s); listing again",
                        self.path,
                        type(err).__name__,
                        err,
                        exc_info=True,
                    )
                    await asyncio.sleep(equal_jitter(attempt, base=LIST_BASE, cap=LIST_CAP))
                    attempt += 1
        finally:
            self.behind_since = None

    async def _follow(self) -> None:
        """One LIST then the WATCH (re-listing on its own after a broken one), until cancelled."""
        while True:
            listing = await self._list_until_served()
            self.behind_since = None
            async for op, obj, relisted in self._kube._watch(
                self.path, self.path, {}, _identity, self._relist, listing.resource_version
            ):
                if relisted is not None:
                    if not relisted.served:
                        # A 404 says nothing of what exists (an API server whose CRD handler is
                        # not ready yet): the store is kept and nobody told, as a failed LIST
                        # (reflector.go list); ``served`` False and ``behind_since`` say it.
                        break
                    self.behind_since = None
                    self._replace(relisted.items)
                elif obj is not None:
                    # An event: the watch resumed from the last version seen, nothing missed.
                    self.behind_since = None
                    self._apply(op, obj)

    async def _list_until_served(self) -> ObjectList:
        """The first LIST (or one after a re-list met a 404), retried with backoff until it is in.
        Only a served LIST replaces the store (reflector.go ``list``: a failed LIST leaves it as it
        was). A first LIST not served makes the store empty and synced (nothing was ever known, and
        readers see ``served`` False); a later one keeps what the store holds, handlers told nothing:
        a 404 from an API server whose CRD handler is not ready yet is no deletion of every object
        (a CRD really deleted has its objects deleted first, and the watch brought those)."""
        attempt = 0
        said = False
        while True:
            try:
                listing = await self._list()
            except Exception as err:  # a garbled answer too, as a refused one
                log.warning("informer %s: list failed (%s: %s); retrying", self.path, type(err).__name__, err)
                await asyncio.sleep(equal_jitter(attempt, base=LIST_BASE, cap=LIST_CAP))
                attempt += 1
                continue
            if listing.served:
                self._replace(listing.items)
                return listing
            if not self.synced.is_set():
                self._replace(())
            # A 404 is the server's answer, not a cache out of step with it: no /healthz failure
            # (a restart cannot install a CRD, and readers already wait on ``served``).
            self.behind_since = None
            if not said:
                log.warning("informer %s: the API server does not serve it (CRD not installed?)", self.path)
                said = True
            # Backed off up to ``unserved_retry``: a transient 404 is over in a second, a CRD not
            # installed costs a few cheap 404s more.
            await asyncio.sleep(equal_jitter(attempt, base=LIST_BASE, cap=self._unserved_retry))
            attempt += 1

    async def _relist(self) -> ObjectList:
        """A re-list after a broken watch (``_watch`` backs off before calling it and, when it
        fails, tries the watch again: a 410 then comes back at once and we list again)."""
        self.behind_since = self.behind_since or self._monotonic()
        return await self._list()

    async def _list(self) -> ObjectList:
        listed = await self._kube.list_versioned(self.path)
        self.lists += 1
        # What a reader needs to tell "none" from "not served" (a CRD not installed), which reads
        # as empty too: the NodeClaim garbage collector collects nothing on the latter.
        self.served = listed is not None
        if listed is None:
            return ObjectList((), "", served=False)
        items, version = listed
        return ObjectList(tuple(items), version)

    # -- the store --------------------------------------------------------------------------------

    def _apply(self, op: str, obj: Obj) -> None:
        key = key_of(obj)
        if op == "DELETED":
            if self._objects.pop(key, None) is None:
                return
        else:
            op = "MODIFIED" if key in self._objects else "ADDED"
            self._objects[key] = obj
        self._changed()
        self._tell(op, obj)

    def _replace(self, items: Iterable[Obj]) -> None:
        """``DeltaFIFO.Replace``: the listing is the truth; what it lacks was deleted."""
        old = self._objects
        new = {key_of(o): o for o in items}
        self._objects = new
        changed = len(old) != len(new)
        told: list[tuple[str, Obj]] = []
        for key, obj in old.items():
            if key not in new:
                told.append(("DELETED", obj))
        for key, obj in new.items():
            before = old.get(key)
            if before is None or not _same(before, obj):
                changed = True
            # Every listed object is handed on, as client-go's re-list resync: a handler that
            # missed nothing sees the same version again.
            told.append(("ADDED" if before is None else "MODIFIED", obj))
        self.synced.set()
        if changed:
            self._changed()
        for op, obj in told:
            self._tell(op, obj)

    def _changed(self) -> None:
        self._items = None
        self.generation += 1

    def _tell(self, op: str, obj: Obj) -> None:
        for handler in tuple(self._handlers):
            try:
                handler(op, obj)
            except Exception:  # a handler's bug must not stop the cache
                log.exception("informer %s: a handler failed on %s %s", self.path, op, key_of(obj))


def _identity(obj: Mapping[str, Any]) -> Obj:
    # The watch's decoded dict, stored as it is (no copy): readers never mutate it.
    return cast(Obj, obj)


class Informers:
    """One informer per resource path, shared by every controller of a process that reads it."""

    def __init__(self, kube: KubeClient, *, unserved_retry: float = UNSERVED_RETRY) -> None:
        self._kube = kube
        self._unserved_retry = unserved_retry
        self._by_path: dict[str, Informer] = {}

    def get(self, path: str) -> Informer:
        """The informer of ``path`` (made on first use; started by ``run`` or its first reader)."""
        path = path.strip("/")
        found = self._by_path.get(path)
        if found is None:
            found = self._by_path[path] = Informer(self._kube, path, unserved_retry=self._unserved_retry)
        return found

    def __iter__(self) -> Iterator[Informer]:
        return iter(tuple(self._by_path.values()))

    async def run(self) -> None:
        """Run every informer made so far (and those made later by their readers) until cancelled;
        cancelled, all of them stop: a replica that stops leading keeps no cache."""
        for informer in self:
            informer.start()
        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.gather(*(i.stop() for i in self), return_exceptions=True)

    @property
    def health_limit(self) -> float:
        """Seconds out of step after which ``/healthz`` fails: the client's watch-health limit (an
        informer that long behind has had its watch silent or refused that long)."""
        return self._kube.watches.health_limit

    def behind(self, *, monotonic: Callable[[], float] = time.monotonic) -> list[tuple[str, float]]:
        """(path, seconds) of every informer out of step with the server (its first LIST, or the
        re-list after a broken watch, not through yet), for ``/healthz``."""
        at = monotonic()
        return [(i.path, max(0.0, at - i.behind_since)) for i in self if i.behind_since is not None]
