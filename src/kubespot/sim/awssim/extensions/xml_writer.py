"""A fast writer of EC2 query-protocol XML entries, byte for byte as moto's serialiser writes them.

moto serialises every answer with its generic serialiser, which walks botocore's shape per value
and looks each key up several ways: ~5 ms per instance type, ~0.7 ms per spot price record on a
loaded machine. Answers of thousands of entries (the instance type catalog, the spot price
history) cost seconds per process. ``entry_writer(operation, field)`` compiles, once per
operation, a writer for one entry of the answer's list from the same botocore EC2 output shape,
following moto's rules (``moto/core/serialize.py`` ``EC2Serializer``): members in the shape's order
under their location names, ``item`` list members, booleans ``true``/``false``, ISO 8601 timestamps
with zeroed milliseconds, empty lists and structures as empty elements, entries that are empty
structures dropped. ``Spliced`` lets moto serialise the envelope (response element, ``nextToken``,
``requestId``, headers) around one marker entry and puts the written entries in its place.

A shape feature it does not render as moto would (maps, blobs, XML attributes or namespaces,
flattened lists) makes ``entry_writer`` answer None: the caller keeps moto's serialiser.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any
from xml.sax.saxutils import escape

from botocore.model import ListShape, Shape, StructureShape
from moto.core.responses import ActionResult
from moto.core.serialize import EC2Serializer, TimestampSerializer
from moto.core.utils import get_service_model

__all__ = ["MARKER", "Spliced", "Writer", "entry_writer", "marker_fragment"]

#: Stands in for the page's entries while moto serialises the envelope (its ``InstanceType``).
MARKER = "kubespot-xml-writer-marker"

Writer = Callable[[Any, list[str]], None]

_lock = threading.Lock()
_writers: dict[tuple[str, str], Writer | None] = {}
_timestamps = TimestampSerializer(EC2Serializer.DEFAULT_TIMESTAMP_FORMAT)


class _Unsupported(Exception):
    """A shape feature the writer does not render as moto would."""


def _convert(value: Any, fmt: str) -> str:
    return escape(str(_timestamps._convert_timestamp_to_str(value, fmt)))


@functools.lru_cache(maxsize=4096)
def _timestamp(value: str, fmt: str) -> str:
    """moto parses every timestamp with dateutil (~0.5 ms); a history repeats a few hundred."""
    return _convert(value, fmt)


def _scalar(shape: Shape) -> Callable[[Any], str]:
    kind = shape.type_name
    if kind == "boolean":
        # moto's XML serialiser: True or any value whose text is "true".
        return lambda v: "true" if v is True or str(v).lower() == "true" else "false"
    if kind in ("integer", "long"):
        return lambda v: str(int(v))
    if kind in ("float", "double"):
        return lambda v: str(float(v))
    if kind == "string":
        return lambda v: escape(str(v))
    if kind == "timestamp":
        fmt = shape.serialization.get("timestampFormat", _timestamps.default_format)
        return lambda v: _timestamp(v, fmt) if isinstance(v, str) else _convert(v, fmt)
    raise _Unsupported(kind)


def _compile(shape: Shape, name: str) -> Writer:
    """A writer appending ``<name>…</name>`` for a value of ``shape``."""
    ser = shape.serialization
    if ser.get("xmlNamespace") or ser.get("xmlAttribute") or ser.get("flattened"):
        raise _Unsupported(name)
    open_, close, empty = f"<{name}>", f"</{name}>", f"<{name}/>"
    if isinstance(shape, StructureShape):
        members = [(key, _compile(m, m.serialization.get("name", key))) for key, m in shape.members.items()]

        def structure(value: Any, out: list[str]) -> None:
            parts: list[str] = []
            for key, write in members:
                member = value.get(key)
                if member is not None:
                    write(member, parts)
            out.append(open_ + "".join(parts) + close if parts else empty)

        return structure
    if isinstance(shape, ListShape):
        item = shape.member
        item_name = item.serialization.get("name", "member")
        write_item = _compile(item, item_name)
        empty_item = f"<{item_name}/>"

        def listing(value: Any, out: list[str]) -> None:
            parts: list[str] = []
            for entry in value:
                write_item(entry, parts)
                # moto drops entries that serialise to an empty structure.
                if isinstance(item, StructureShape) and parts and parts[-1] == empty_item:
                    parts.pop()
            out.append(open_ + "".join(parts) + close if parts else empty)

        return listing
    text = _scalar(shape)

    def scalar(value: Any, out: list[str]) -> None:
        rendered = text(value)
        out.append(open_ + rendered + close if rendered else empty)

    return scalar


def entry_writer(operation: str, field: str) -> Writer | None:
    """The writer of one entry of ``operation``'s output list ``field`` (None: use moto's)."""
    key = (operation, field)
    with _lock:
        if key in _writers:
            return _writers[key]
    output = get_service_model("ec2").operation_model(operation).output_shape
    assert isinstance(output, StructureShape)
    listing = output.members[field]
    assert isinstance(listing, ListShape)
    item = listing.member
    try:
        writer: Writer | None = _compile(item, item.serialization.get("name", "member"))
    except _Unsupported:
        writer = None
    with _lock:
        _writers[key] = writer
    return writer


def disable(operation: str, field: str) -> None:
    """Use moto's serialiser for this list from now on (tests comparing the two)."""
    with _lock:
        _writers[(operation, field)] = None


def enable(operation: str, field: str) -> None:
    """Compile the writer again on the next answer (undoes ``disable``)."""
    with _lock:
        _writers.pop((operation, field), None)


def marker_fragment(writer: Writer) -> tuple[dict[str, str], str]:
    """The marker entry to hand moto and the fragment it becomes in moto's answer."""
    entry = {"InstanceType": MARKER}
    out: list[str] = []
    writer(entry, out)
    return entry, out[0]


class Spliced(ActionResult):
    """moto serialises the envelope around one marker entry; the page's fragments replace it."""

    def __init__(self, result: object, marker: str, fragments: list[str]) -> None:
        super().__init__(result)
        self._marker = marker
        self._fragments = fragments

    def execute_result(self, context: Any) -> Any:
        status, headers, body = super().execute_result(context)
        body = str(body).replace(self._marker, "".join(self._fragments), 1)
        return status, headers, body
