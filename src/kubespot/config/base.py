"""The ``setting`` declaration shared by every settings dataclass."""

from __future__ import annotations

from dataclasses import Field, field
from typing import Any, TypedDict


class SettingMeta(TypedDict, total=False):
    """What the loader and the reference generator know about a field."""

    doc: str  # what it does, its unit and why the default is what it is
    env: str  # kubespot's environment variable (KUBESPOT_...)
    nth: tuple[str, ...]  # aws-node-termination-handler's names for it, accepted as aliases
    flag: str  # command-line flag, e.g. "--poll-interval"
    secret: bool  # never printed or logged
    unit: str  # e.g. "seconds"
    empty_is_value: bool  # an empty env var under kubespot's name is a value ("Empty: ..."), not unset


def setting(
    default: Any,
    *,
    doc: str,
    env: str | None = None,
    nth: str | tuple[str, ...] = (),
    flag: str | None = None,
    secret: bool = False,
    unit: str | None = None,
    empty_is_value: bool = False,
) -> Any:
    """Declare a settings field. Mutable defaults are not allowed: use tuples and frozensets.

    ``empty_is_value``: the doc gives an empty value a meaning of its own (``Empty: one tier``) that
    differs from the default, so ``KUBESPOT_X=""`` means that, not "unset".
    """
    meta: SettingMeta = {"doc": doc, "secret": secret, "nth": (nth,) if isinstance(nth, str) else tuple(nth)}
    if empty_is_value:
        meta["empty_is_value"] = True
    if env:
        meta["env"] = env
    if flag:
        meta["flag"] = flag
    if unit:
        meta["unit"] = unit
    f: Field[Any] = field(default=default, metadata=meta)
    return f
