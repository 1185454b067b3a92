"""Name and value rules of k8s.io/apimachinery pkg/util/validation/validation.go, messages as upstream.

``IsQualifiedName`` (label and annotation keys, taint and toleration keys), ``IsValidLabelValue``,
``IsDNS1123Subdomain`` and ``IsDNS1123Label``: each returns upstream's list of messages (empty when
the value is valid). Keys and values repeat on every write, so the answers are cached. Pure.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Final

QNAME_FMT: Final = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
LABEL_VALUE_FMT: Final = "(" + QNAME_FMT + ")?"
DNS1123_LABEL_FMT: Final = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_FMT: Final = DNS1123_LABEL_FMT + "(\\." + DNS1123_LABEL_FMT + ")*"
_QNAME_RE: Final = re.compile(QNAME_FMT)
_LABEL_VALUE_RE: Final = re.compile(LABEL_VALUE_FMT)
_DNS1123_LABEL_RE: Final = re.compile(DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE: Final = re.compile(DNS1123_SUBDOMAIN_FMT)


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """``RegexError``: upstream joins examples with "', " + " or ", hence the double space."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    out = msg + " (e.g. "
    for i, ex in enumerate(examples):
        if i:
            out += " or "
        out += f"'{ex}', "
    return out + f"regex used for validation is '{fmt}')"


def max_len_error(n: int) -> str:
    return f"must be no more than {n} characters"


_QNAME_MSG: Final = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character"
)
_QNAME_ERR: Final = regex_error(_QNAME_MSG, QNAME_FMT, "MyName", "my.name", "123-abc")
_LABEL_VALUE_ERR: Final = regex_error(
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character",
    LABEL_VALUE_FMT,
    "MyValue",
    "my_value",
    "12345",
)
_DNS1123_SUBDOMAIN_ERR: Final = regex_error(
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character",
    DNS1123_SUBDOMAIN_FMT,
    "example.com",
)
_DNS1123_LABEL_ERR: Final = regex_error(
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    "start and end with an alphanumeric character",
    DNS1123_LABEL_FMT,
    "my-name",
    "123-abc",
)


@lru_cache(maxsize=8192)
def qualified_name_errors(value: str) -> tuple[str, ...]:
    """IsQualifiedName: an optional DNS-subdomain prefix and '/', then a name of up to 63 characters."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in dns1123_subdomain_errors(prefix))
    else:
        return (
            "a qualified name "
            + _QNAME_ERR
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
        )
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part " + max_len_error(63))
    if not _QNAME_RE.fullmatch(name):
        errs.append("name part " + _QNAME_ERR)
    return tuple(errs)


@lru_cache(maxsize=8192)
def label_value_errors(value: str) -> tuple[str, ...]:
    """IsValidLabelValue: empty, or up to 63 characters of a qualified name's alphabet."""
    errs: list[str] = []
    if len(value) > 63:
        errs.append(max_len_error(63))
    if not _LABEL_VALUE_RE.fullmatch(value):
        errs.append(_LABEL_VALUE_ERR)
    return tuple(errs)


def dns1123_subdomain_errors(value: str) -> tuple[str, ...]:
    """IsDNS1123Subdomain (object names, prefixes)."""
    errs: list[str] = []
    if len(value) > 253:
        errs.append(max_len_error(253))
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        errs.append(_DNS1123_SUBDOMAIN_ERR)
    return tuple(errs)


@lru_cache(maxsize=1024)
def dns1123_label_errors(value: str) -> tuple[str, ...]:
    """IsDNS1123Label (container and namespace names)."""
    errs: list[str] = []
    if len(value) > 63:
        errs.append(max_len_error(63))
    if not _DNS1123_LABEL_RE.fullmatch(value):
        errs.append(_DNS1123_LABEL_ERR)
    return tuple(errs)
