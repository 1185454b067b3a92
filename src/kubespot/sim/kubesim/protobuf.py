"""Decoding of the Kubernetes protobuf bodies kubectl's typed generators send.

``kubectl create namespace|configmap|secret|serviceaccount`` post
``application/vnd.kubernetes.protobuf``: the 4-byte magic ``k8s\\0`` and a ``runtime.Unknown``
envelope whose ``raw`` field holds the object. kubesim stores JSON, so it decodes those few kinds
here (a schema of field numbers from upstream's ``generated.proto``) and answers 415 for any other,
as an API server does for a media type it cannot read.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

MAGIC = b"k8s\x00"


class ProtobufError(ValueError):
    """The body is not a protobuf kubesim can decode."""


# A field: (JSON name, kind). Kinds: "string", "bytes", "int", "bool", "time", "strings" (repeated
# string), "map" (map<string,string>), "bytesmap" (map<string,bytes>), or a message name; a message
# name ending in "[]" is repeated.
Schema = dict[int, tuple[str, str]]

SCHEMAS: dict[str, Schema] = {
    "ObjectMeta": {
        1: ("name", "string"),
        2: ("generateName", "string"),
        3: ("namespace", "string"),
        5: ("uid", "string"),
        6: ("resourceVersion", "string"),
        7: ("generation", "int"),
        8: ("creationTimestamp", "time"),
        11: ("labels", "map"),
        12: ("annotations", "map"),
        13: ("ownerReferences", "OwnerReference[]"),
        14: ("finalizers", "strings"),
    },
    "OwnerReference": {
        1: ("kind", "string"),
        3: ("name", "string"),
        4: ("uid", "string"),
        5: ("apiVersion", "string"),
        6: ("controller", "bool"),
        7: ("blockOwnerDeletion", "bool"),
    },
    "Namespace": {1: ("metadata", "ObjectMeta"), 2: ("spec", "NamespaceSpec")},
    "NamespaceSpec": {1: ("finalizers", "strings")},
    "ConfigMap": {
        1: ("metadata", "ObjectMeta"),
        2: ("data", "map"),
        3: ("binaryData", "bytesmap"),
        4: ("immutable", "bool"),
    },
    "Secret": {
        1: ("metadata", "ObjectMeta"),
        2: ("data", "bytesmap"),
        3: ("type", "string"),
        4: ("stringData", "map"),
        5: ("immutable", "bool"),
    },
    "ServiceAccount": {
        1: ("metadata", "ObjectMeta"),
        3: ("imagePullSecrets", "LocalObjectReference[]"),
        4: ("automountServiceAccountToken", "bool"),
    },
    "LocalObjectReference": {1: ("name", "string")},
}
#: Kinds a body may carry, by (apiVersion, kind).
DECODABLE = {("v1", "Namespace"), ("v1", "ConfigMap"), ("v1", "Secret"), ("v1", "ServiceAccount")}


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ProtobufError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ProtobufError("varint too long")


def _fields(buf: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) pairs: ints for varints, bytes for length-delimited fields."""
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
            out.append((number, value))
        elif wire == 2:
            length, pos = _varint(buf, pos)
            if pos + length > len(buf):
                raise ProtobufError("truncated field")
            out.append((number, buf[pos : pos + length]))
            pos += length
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4  # fixed-width fields: none in the kinds decoded here
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
    return out


def _text(value: int | bytes) -> str:
    if not isinstance(value, bytes):
        raise ProtobufError("expected a length-delimited field")
    try:
        return value.decode()
    except UnicodeDecodeError:
        raise ProtobufError("a string field is not UTF-8") from None


def _map_entry(value: int | bytes, decode_value: Callable[[int | bytes], Any]) -> tuple[str, Any]:
    if not isinstance(value, bytes):
        raise ProtobufError("a map entry is not a message")
    key: str = ""
    val: Any = decode_value(b"")
    for number, field_value in _fields(value):
        if number == 1:
            key = _text(field_value)
        elif number == 2:
            val = decode_value(field_value)
    return key, val


def _bytes_b64(value: int | bytes) -> str:
    if not isinstance(value, bytes):
        raise ProtobufError("expected bytes")
    return base64.b64encode(value).decode()


def _time(value: int | bytes) -> str | None:
    """RFC 3339 of a ``metav1.Time``; None for the zero time Go writes for an unset one."""
    if not isinstance(value, bytes):
        raise ProtobufError("a time is not a message")
    seconds = next((v for n, v in _fields(value) if n == 1 and isinstance(v, int)), 0)
    if not seconds:
        return None
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def decode_message(buf: bytes, name: str) -> dict[str, Any]:
    schema = SCHEMAS[name]
    out: dict[str, Any] = {}
    for number, value in _fields(buf):
        if number not in schema:
            continue  # fields kubectl's generators never set
        json_name, kind = schema[number]
        # Go's marshaller writes empty optional values; their JSON form omits them (omitempty).
        if kind == "string":
            if value:
                out[json_name] = _text(value)
        elif kind == "int":
            if isinstance(value, int) and value:
                out[json_name] = value
        elif kind == "bool":
            out[json_name] = bool(value)
        elif kind == "time":
            stamp = _time(value)
            if stamp is not None:
                out[json_name] = stamp
        elif kind == "strings":
            out.setdefault(json_name, []).append(_text(value))
        elif kind in ("map", "bytesmap"):
            k, v = _map_entry(value, _text if kind == "map" else _bytes_b64)
            out.setdefault(json_name, {})[k] = v
        elif kind.endswith("[]"):
            out.setdefault(json_name, []).append(decode_message(_as_bytes(value), kind[:-2]))
        else:
            out[json_name] = decode_message(_as_bytes(value), kind)
    return out


def _as_bytes(value: int | bytes) -> bytes:
    if not isinstance(value, bytes):
        raise ProtobufError("expected a message")
    return value


def decode_object(body: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf-encoded object; ProtobufError for anything not decodable."""
    if not body.startswith(MAGIC):
        raise ProtobufError("missing the k8s protobuf magic prefix")
    api_version = kind = ""
    raw = b""
    for number, value in _fields(body[len(MAGIC) :]):
        if number == 1:  # typeMeta
            for n, v in _fields(_as_bytes(value)):
                if n == 1:
                    api_version = _text(v)
                elif n == 2:
                    kind = _text(v)
        elif number == 2:
            raw = _as_bytes(value)
    if (api_version, kind) not in DECODABLE:
        raise ProtobufError(
            f"kubesim decodes protobuf only for {sorted(k for _v, k in DECODABLE)}, not {kind!r}"
        )
    return {"apiVersion": api_version, "kind": kind, **decode_message(raw, kind)}
