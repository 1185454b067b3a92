"""The loader on its own: precedence, conversions, files, flags and the errors it reports."""

from __future__ import annotations

import argparse
import json
from dataclasses import MISSING, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Literal

import pytest

from kubespot.config.base import setting
from kubespot.config.loader import (
    CONFIG_FILE_ENV,
    InvalidSetting,
    SettingsError,
    add_arguments,
    load,
    redacted,
    specs,
)


class Color(StrEnum):
    RED = "red"
    BLUE = "blue"


@dataclass(frozen=True, kw_only=True)
class Inner:
    """An inner group."""

    level: Literal["low", "High"] = setting("low", doc="A choice.", env="KUBESPOT_INNER_LEVEL", nth="LEVEL")
    wait: float = setting(2.0, doc="A duration.", env="KUBESPOT_INNER_WAIT", unit="seconds")
    count: int = setting(1, doc="A count.", env="KUBESPOT_INNER_COUNT", nth=("COUNT", "OLD_COUNT"))
    limit: int | None = setting(None, doc="Optional; -1 means unset.", env="KUBESPOT_INNER_LIMIT")
    names: tuple[str, ...] = setting(("a",), doc="A list.", env="KUBESPOT_INNER_NAMES")
    labels: tuple[tuple[str, str], ...] = setting((), doc="A mapping.", env="KUBESPOT_INNER_LABELS")
    color: Color = setting(Color.RED, doc="An enum.", env="KUBESPOT_INNER_COLOR")  # noqa: RUF009
    token: str | None = setting(None, doc="A secret.", env="KUBESPOT_INNER_TOKEN", secret=True)

    def __post_init__(self) -> None:
        if self.count > 100:
            raise InvalidSetting("count", "must be at most 100")
        if self.wait > 10000:
            raise ValueError("KUBESPOT_INNER_WAIT must be at most 10000")


@dataclass(frozen=True, kw_only=True)
class Root:
    """The root."""

    name: str = setting(MISSING, doc="Required.", env="KUBESPOT_NAME", nth="NAME", flag="--name")
    verbose: bool = setting(False, doc="A switch.", env="KUBESPOT_VERBOSE", nth="VERBOSE")
    inner: Inner = field(default_factory=Inner)


BASE = {"KUBESPOT_NAME": "n"}


def _error(**kwargs: object) -> SettingsError:
    with pytest.raises(SettingsError) as info:
        load(Root, **kwargs)  # type: ignore[arg-type]
    return info.value


# --- precedence -------------------------------------------------------------------------------------


def test_defaults_apply_when_nothing_is_set() -> None:
    root = load(Root, env=BASE)
    assert root == Root(name="n")


def test_flag_beats_env_beats_alias_beats_file_beats_default(tmp_path: Path) -> None:
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"inner.count": 2}))
    assert load(Root, env=BASE).inner.count == 1
    assert load(Root, env=BASE, file=f).inner.count == 2
    assert load(Root, env={**BASE, "COUNT": "3"}, file=f).inner.count == 3
    assert load(Root, env={**BASE, "COUNT": "3", "KUBESPOT_INNER_COUNT": "4"}, file=f).inner.count == 4
    argv = ["--inner-count", "5"]
    assert (
        load(Root, argv=argv, env={**BASE, "COUNT": "3", "KUBESPOT_INNER_COUNT": "4"}, file=f).inner.count
        == 5
    )


def test_aliases_are_tried_in_declared_order() -> None:
    assert load(Root, env={**BASE, "OLD_COUNT": "7"}).inner.count == 7
    assert load(Root, env={**BASE, "OLD_COUNT": "7", "COUNT": "8"}).inner.count == 8


def test_an_empty_variable_counts_as_unset(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text("inner:\n  count: 9\n")
    assert load(Root, env={**BASE, "KUBESPOT_INNER_COUNT": "", "COUNT": " "}, file=f).inner.count == 9


def test_an_empty_variable_is_a_value_where_the_doc_gives_empty_a_meaning(tmp_path: Path) -> None:
    """``KUBESPOT_DRAIN_CRITICAL_LAST=""`` is "Empty: one tier" (its doc), not "unset, so the default
    two classes". Under an NTH name, or for a setting without the marker, empty stays unset: NTH's own
    ``getEnv`` (pkg/config/config.go) falls back to the default for an empty value."""
    from kubespot.config.agent import AgentSettings

    env = {"NODE_NAME": "n1"}
    assert load(AgentSettings, env=env).drain.critical_last == (
        "system-cluster-critical",
        "system-node-critical",
    )
    assert load(AgentSettings, env={**env, "KUBESPOT_DRAIN_CRITICAL_LAST": ""}).drain.critical_last == ()
    assert load(AgentSettings, env={**env, "KUBESPOT_DRAIN_CRITICAL_LAST": " "}).drain.critical_last == ()
    # A file's value still loses to the empty variable, as to any other env value.
    f = tmp_path / "s.yaml"
    f.write_text("drain:\n  critical_last: [a]\n")
    assert (
        load(AgentSettings, env={**env, "KUBESPOT_DRAIN_CRITICAL_LAST": ""}, file=f).drain.critical_last == ()
    )
    # Unmarked settings keep treating empty as unset.
    assert (
        load(AgentSettings, env={**env, "KUBESPOT_DRAIN_DELETE_LOCAL_DATA": ""}).drain
        == load(AgentSettings, env=env).drain
    )


def test_file_comes_from_config_flag_or_env(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text("verbose: true\n")
    assert load(Root, argv=["--config", str(f)], env=BASE).verbose is True
    assert load(Root, env={**BASE, CONFIG_FILE_ENV: str(f)}).verbose is True


# --- conversions ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("word", "value"),
    [
        ("true", True),
        ("TRUE", True),
        ("1", True),
        ("yes", True),
        ("false", False),
        ("0", False),
        ("No", False),
    ],
)
def test_booleans(word: str, value: bool) -> None:
    assert load(Root, env={**BASE, "VERBOSE": word}).verbose is value


def test_choices_are_case_insensitive_and_canonical() -> None:
    assert load(Root, env={**BASE, "LEVEL": "high"}).inner.level == "High"
    assert load(Root, env={**BASE, "KUBESPOT_INNER_COLOR": "BLUE"}).inner.color is Color.BLUE


@pytest.mark.parametrize(
    ("raw", "seconds"), [("90", 90.0), ("1.5", 1.5), ("90s", 90.0), ("5m", 300.0), ("1h30m", 5400.0)]
)
def test_durations(raw: str, seconds: float) -> None:
    assert load(Root, env={**BASE, "KUBESPOT_INNER_WAIT": raw}).inner.wait == seconds


@pytest.mark.parametrize("raw", ["1e12", "1e14", "315360001", "87600h1s"])
def test_a_duration_past_ten_years_is_refused_at_load(raw: str) -> None:
    """Added to now such a duration passes Python's year 9999 where it is used (a scheduled
    event's start minus the lead, a deadline): refused once, at load, naming the setting."""
    with pytest.raises(SettingsError, match=r"inner.wait: expected a duration of at most 315360000 s"):
        load(Root, env={**BASE, "KUBESPOT_INNER_WAIT": raw})


def test_the_agents_scheduled_lead_time_is_bounded() -> None:
    """review 16e: a lead of 1e12 s overflowed the Health event's start minus it, so every
    scheduled-change message was treated as malformed."""
    from kubespot.config.imds import MonitorSettings

    with pytest.raises(SettingsError, match="scheduled_lead_time: expected a duration of at most"):
        load(MonitorSettings, env={"KUBESPOT_IMDS_SCHEDULED_LEAD_TIME": "1e12"})
    ten_years = load(MonitorSettings, env={"KUBESPOT_IMDS_SCHEDULED_LEAD_TIME": "87600h"})
    assert ten_years.scheduled_lead_time == 315360000.0  # the bound itself is a duration


@pytest.mark.parametrize(("raw", "value"), [("-1", None), ("", None), ("none", None), ("12", 12)])
def test_optional_numbers_take_minus_one_as_unset(raw: str, value: int | None) -> None:
    # An empty variable is unset, which is the default None too.
    assert load(Root, env={**BASE, "KUBESPOT_INNER_LIMIT": raw}).inner.limit == value


@pytest.mark.parametrize("raw", ["x, y,z", '["x", "y", "z"]'])
def test_lists(raw: str) -> None:
    assert load(Root, env={**BASE, "KUBESPOT_INNER_NAMES": raw}).inner.names == ("x", "y", "z")


@pytest.mark.parametrize("raw", ["a=1,b=x=y", '{"a": "1", "b": "x=y"}'])
def test_mappings(raw: str) -> None:
    assert load(Root, env={**BASE, "KUBESPOT_INNER_LABELS": raw}).inner.labels == (("a", "1"), ("b", "x=y"))


# --- files ------------------------------------------------------------------------------------------


def test_yaml_file_nested_and_dotted(tmp_path: Path) -> None:
    f = tmp_path / "s.yml"
    f.write_text("name: from-file\ninner:\n  level: High\n  names: [p, q]\ninner.labels: {k: v}\n")
    root = load(Root, env={}, file=f)
    assert (root.name, root.inner.level, root.inner.names, root.inner.labels) == (
        "from-file",
        "High",
        ("p", "q"),
        (("k", "v"),),
    )


def test_json_file(tmp_path: Path) -> None:
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"verbose": True, "inner": {"wait": "2m", "limit": -1}}))
    root = load(Root, env=BASE, file=f)
    assert (root.verbose, root.inner.wait, root.inner.limit) == (True, 120.0, None)


def test_unknown_file_key_is_an_error_with_a_suggestion(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text("inner:\n  cont: 3\nbogus: 1\n")
    err = _error(env=BASE, file=f)
    assert [p.setting for p in err.problems] == ["inner.cont", "bogus"]
    assert "did you mean inner.count?" in str(err)
    assert f"file {f} key inner.cont" in str(err)


def test_a_setting_given_twice_in_one_file_is_an_error(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text("inner.count: 1\ninner:\n  count: 2\n")
    assert "set twice" in str(_error(env=BASE, file=f))


@pytest.mark.parametrize(("name", "text"), [("s.yaml", "a: [1\n"), ("s.json", "{"), ("s.yaml", "- 1\n")])
def test_unreadable_files_are_settings_errors(tmp_path: Path, name: str, text: str) -> None:
    f = tmp_path / name
    f.write_text(text)
    assert str(f) in str(_error(env=BASE, file=f))


def test_missing_file_is_a_settings_error(tmp_path: Path) -> None:
    assert "cannot read" in str(_error(env=BASE, file=tmp_path / "nope.yaml"))


# --- errors -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "setting", "source"),
    [
        ({"VERBOSE": "maybe"}, "verbose", "env VERBOSE (aws-node-termination-handler name)"),
        ({"KUBESPOT_INNER_COUNT": "many"}, "inner.count", "env KUBESPOT_INNER_COUNT"),
        ({"KUBESPOT_INNER_COUNT": "1.5"}, "inner.count", "env KUBESPOT_INNER_COUNT"),
        ({"LEVEL": "medium"}, "inner.level", "env LEVEL (aws-node-termination-handler name)"),
        ({"KUBESPOT_INNER_WAIT": "soon"}, "inner.wait", "env KUBESPOT_INNER_WAIT"),
        ({"KUBESPOT_INNER_WAIT": "nan"}, "inner.wait", "env KUBESPOT_INNER_WAIT"),
        ({"KUBESPOT_INNER_LABELS": "a"}, "inner.labels", "env KUBESPOT_INNER_LABELS"),
        ({"KUBESPOT_INNER_COLOR": "green"}, "inner.color", "env KUBESPOT_INNER_COLOR"),
    ],
)
def test_bad_values_name_setting_source_and_value(env: dict[str, str], setting: str, source: str) -> None:
    err = _error(env={**BASE, **env})
    (problem,) = err.problems
    assert (problem.setting, problem.source) == (setting, source)
    assert repr(next(iter(env.values()))) in str(err)


def test_bad_flag_value_names_the_flag() -> None:
    (problem,) = _error(argv=["--inner-count", "x"], env=BASE).problems
    assert (problem.setting, problem.source) == ("inner.count", "flag --inner-count")


def test_bad_file_value_names_the_key(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text("inner:\n  count: true\n")  # a YAML boolean is not a count
    (problem,) = _error(env=BASE, file=f).problems
    assert problem.source == f"file {f} key inner.count"


def test_group_validation_names_the_setting_and_its_source() -> None:
    (problem,) = _error(env={**BASE, "COUNT": "101"}).problems
    assert (problem.setting, problem.source, problem.value) == (
        "inner.count",
        "env COUNT (aws-node-termination-handler name)",
        "'101'",
    )
    assert problem.reason == "must be at most 100"


def test_a_plain_value_error_is_blamed_on_the_setting_it_names() -> None:
    (problem,) = _error(env={**BASE, "KUBESPOT_INNER_WAIT": "20000"}).problems
    assert (problem.setting, problem.source) == ("inner.wait", "env KUBESPOT_INNER_WAIT")


def test_every_problem_is_reported_at_once() -> None:
    err = _error(env={"VERBOSE": "maybe", "COUNT": "x"})
    assert [p.setting for p in err.problems] == ["name", "verbose", "inner.count"]


def test_missing_required_setting_says_how_to_set_it() -> None:
    (problem,) = _error(env={}).problems
    assert str(problem) == "name: required but not set: set --name, KUBESPOT_NAME or NAME"


def test_secret_values_never_appear_in_errors() -> None:
    @dataclass(frozen=True)
    class Strict:
        token: str = setting("", doc="A secret.", env="KUBESPOT_TOKEN", secret=True)

        def __post_init__(self) -> None:
            if self.token and not self.token.startswith("tok-"):
                raise InvalidSetting("token", "must start with tok-")

    with pytest.raises(SettingsError) as info:
        load(Strict, env={"KUBESPOT_TOKEN": "hunter2"})
    assert "hunter2" not in str(info.value)
    assert "<redacted>" in str(info.value)


def test_unsupported_field_types_fail_loudly() -> None:
    @dataclass(frozen=True)
    class Odd:
        things: list[str] = setting(None, doc="A mutable list: not a settings type.")  # noqa: RUF009

    with pytest.raises(TypeError, match="cannot read"):
        specs(Odd)


# --- flags ------------------------------------------------------------------------------------------


def test_boolean_flags_have_a_negative_form() -> None:
    assert load(Root, argv=["--verbose"], env=BASE).verbose is True
    assert load(Root, argv=["--no-verbose"], env={**BASE, "VERBOSE": "true"}).verbose is False


def test_flags_derive_from_env_names_and_secrets_have_none() -> None:
    flags = {s.path: s.flag for s in specs(Root)}
    assert flags["inner.count"] == "--inner-count"
    assert flags["name"] == "--name"
    assert flags["inner.token"] is None


def test_a_callers_own_parser_and_namespace() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mine")
    add_arguments(parser, Root)
    ns = parser.parse_args(["--mine", "x", "--name", "from-flag", "--inner-names", "u,v"])
    root = load(Root, namespace=ns, env={})
    assert (ns.mine, root.name, root.inner.names) == ("x", "from-flag", ("u", "v"))


# --- printing ---------------------------------------------------------------------------------------


def test_redacted_hides_secrets_but_shows_they_are_unset() -> None:
    assert redacted(load(Root, env=BASE))["inner"]["token"] is None
    shown = redacted(load(Root, env={**BASE, "KUBESPOT_INNER_TOKEN": "hunter2"}))
    assert shown["inner"]["token"] == "<redacted>"
    assert "hunter2" not in json.dumps(shown)
    assert shown["inner"]["color"] == "red" and shown["inner"]["names"] == ["a"]
