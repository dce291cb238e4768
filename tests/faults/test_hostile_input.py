"""Hostile input: generated configs and labels never produce a traceback.

A config either loads or fails with ONE line (in-process and through the CLI's error path); a
bad label is one warning for that container while every other container keeps being watched.
Each property runs at least 1,000 examples.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from guardian.adapters.sqlite.store import SqliteStore
from guardian.config import SCHEMA, ConfigError, Settings, load_settings
from guardian.core import labels as L
from guardian.core.detection.restart_policy import RestartPolicy
from guardian.core.labels import rules_for
from guardian.entrypoints.cli import main
from guardian.logs import FIELDS, LogfmtFormatter
from tests.app import make_app
from tests.fakes import FakeClock, FakeEngine
from tests.faults.conftest import report_figures, run_cli
from tests.faults.exposure import Exposure

# bench/soak.sh raises it; CI runs the minimum.
EXAMPLES = settings(
    max_examples=int(os.environ.get("GUARDIAN_FUZZ_EXAMPLES", "1000")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# -- configs --------------------------------------------------------------------------------

KNOWN_KEYS = [key for keys in SCHEMA.values() for key in keys]
ENV_NAMES = [f"GUARDIAN_{s}_{k}".upper() for s, keys in SCHEMA.items() for k in keys]

numbers = st.one_of(
    st.integers(min_value=-(10**400), max_value=10**400),
    st.integers(min_value=-5, max_value=100_000),
    st.floats(allow_nan=True, allow_infinity=True),
)
durations = st.builds(
    lambda n, unit, pad: f"{pad}{n}{unit}",
    st.one_of(numbers, st.text(st.characters(categories=["Nd"]), min_size=1, max_size=4)),
    st.sampled_from(["", "ms", "s", "m", "h", "d", "w", "sec", " s", "S", "µs", "1"]),
    st.sampled_from(["", " ", "-", "+", "0x"]),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    numbers,
    durations,
    st.text(max_size=40),
    st.sampled_from(["true", "no", "unix:///x", "0.0.0.0:99999", "a=b", "=b", "", " "]),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
sections = st.one_of(st.sampled_from(list(SCHEMA)), st.text(max_size=10))
keys = st.one_of(st.sampled_from(KNOWN_KEYS), st.text(max_size=10))
documents = st.dictionaries(
    sections, st.one_of(st.dictionaries(keys, values, max_size=5), values), max_size=5
)


def _yaml(doc: Any) -> bytes:
    return yaml.safe_dump(doc, allow_unicode=True).encode()


def _deep(depth: int, kind: str) -> bytes:
    if kind == "flow":
        return b"restart: " + b"[" * depth + b"]" * depth
    return b"".join(b"  " * i + b"k%d:\n" % i for i in range(depth)) + b"  " * depth + b"v\n"


def _splice(data: bytes, junk: bytes, at: int) -> bytes:
    at = at % (len(data) + 1)
    return data[:at] + junk + data[at:]


raw_configs = st.one_of(
    documents.map(_yaml),
    st.builds(_splice, documents.map(_yaml), st.binary(min_size=1, max_size=8), st.integers()),
    st.builds(_deep, st.integers(min_value=1, max_value=800), st.just("flow")),
    st.builds(_deep, st.integers(min_value=1, max_value=200), st.just("block")),
    st.binary(max_size=200),
    st.text(max_size=200).map(str.encode),
)
env_overrides = st.dictionaries(st.sampled_from(ENV_NAMES), st.text(max_size=30), max_size=3)

TRIED: dict[str, int] = {}


def _tried(name: str) -> None:
    TRIED[name] = TRIED.get(name, 0) + 1


_TMP = Path(tempfile.mkdtemp(prefix="gdt-fuzz-"))


@pytest.fixture(scope="module", autouse=True)
def _report_tried() -> Iterator[None]:
    yield
    report_figures("fuzz", dict(TRIED))
    shutil.rmtree(_TMP, ignore_errors=True)


_CONFIG = _TMP / "config.yaml"


def _assert_one_line(message: str) -> None:
    assert message and "\n" not in message and "Traceback" not in message, message
    assert len(message) < 500, message


@EXAMPLES
@given(raw=raw_configs, env=env_overrides)
@example(raw=b'"\\U01000000', env={})  # found by the soak: PyYAML raised ValueError
@example(raw=b'"\\Ua0000000', env={})  # ... and OverflowError
@example(raw=b"\x00", env={})  # PyYAML's reader refuses it as the loader is made
def test_any_config_loads_or_fails_with_one_line(raw: bytes, env: dict[str, str]) -> None:
    _tried("configs")
    _CONFIG.write_bytes(raw)
    try:
        result = load_settings(_CONFIG, env=env)
    except ConfigError as exc:
        _assert_one_line(str(exc))
        return
    assert isinstance(result, Settings)
    assert 1 <= result["restart.max_attempts"] <= 1000
    assert result["restart.cooldown"] >= timedelta(0)


@EXAMPLES
@given(raw=raw_configs)
@example(raw=b'"\\U01000000')
@example(raw=b'"\\Ua0000000')
@example(raw=b"\x00")
def test_cli_config_validate_prints_one_line_and_exits_2_on_any_bad_config(raw: bytes) -> None:
    _tried("configs_through_cli")
    _CONFIG.write_bytes(raw)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["config", "validate", "--config", str(_CONFIG)])
    if code == 0:
        assert out.getvalue().startswith("config ok"), out.getvalue()
        assert err.getvalue() == ""
        return
    assert code == 2, (code, err.getvalue())
    message = err.getvalue().rstrip("\n")
    _assert_one_line(message)
    assert message.startswith("guardian: config error: ")


def test_the_real_cli_answers_hostile_files_with_one_line(tmp_path: Path) -> None:
    exposure = Exposure()
    for name, raw in {
        "non-utf8": b"restart:\n  cooldown: \xff\xfe30s\n",
        "deep": _deep(5000, "flow"),
        "huge": b"restart:\n  max_attempts: " + b"9" * 500 + b"\n",
        "negative": b"restart:\n  cooldown: -5s\n",
        "unknown": b"restart:\n  max_attempt: 3\n",
    }.items():
        path = tmp_path / f"{name}.yaml"
        path.write_bytes(raw)
        proc = run_cli(exposure, "config", "validate", "--config", str(path), timeout=30)
        assert proc.returncode == 2, (name, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("guardian: config error: "), proc.stderr
    assert not exposure.leaks()


def _alias_bomb(levels: int) -> bytes:
    rows = [f"    - &a0 [{','.join(['lol'] * 9)}]"]
    rows += [f"    - &a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return ("docker:\n  url:\n" + "\n".join(rows) + "\n").encode()


def _limit_memory() -> None:
    # What the CLI may use at most: a bomb that expands hits this and ends in a MemoryError.
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


MEMORY_LIMIT = 256 * 1024 * 1024


@pytest.mark.parametrize("levels", [10, 12])
def test_an_alias_bomb_ends_in_one_line_within_bounded_time_and_memory(
    tmp_path: Path, levels: int
) -> None:
    # 9**10 and 9**12 strings under docker.url from a file of 1-2 KB: before the loader bounded
    # aliases, repr() of it for the error message ran to 3.6 GB.
    path = tmp_path / "bomb.yaml"
    path.write_bytes(_alias_bomb(levels))
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "guardian.entrypoints.cli", "config", "validate", "--config", path],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_limit_memory,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )
    elapsed = time.monotonic() - started
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr == (
        f"guardian: config error: {path}: invalid YAML: its aliases expand to more than "
        "10000 values\n"
    )
    report_figures("alias_bomb", {f"levels_{levels}_seconds": round(elapsed, 2)})


# -- labels ---------------------------------------------------------------------------------

LABEL_KEYS = [L.ENABLE, L.SELF, L.MAX_ATTEMPTS, L.COOLDOWN, L.STOP_TIMEOUT, L.NOTIFY]
label_values = st.one_of(
    st.text(max_size=60),
    durations,
    numbers.map(str),
    st.sampled_from(["$(reboot)", "`id`", "; rm -rf /", "'\"\\", "\n", "\x00", "🚑", "ℵ₀"]),
)
label_sets = st.dictionaries(
    st.one_of(st.sampled_from(LABEL_KEYS), st.text(max_size=20)), label_values, max_size=6
)
BASE = RestartPolicy(cooldown=timedelta(seconds=2), max_attempts=3)


@EXAMPLES
@given(labels=label_sets)
@example(labels={L.MAX_ATTEMPTS: "²"})  # found by the soak: isdigit() but not int()
def test_any_labels_give_rules_or_one_line_warnings(labels: dict[str, str]) -> None:
    _tried("label_sets")
    rules = rules_for(labels, BASE, timedelta(seconds=10), "guardian.enable")
    for warning in rules.warnings:
        _assert_one_line(warning)
    assert 1 <= rules.policy.max_attempts <= 1000
    assert rules.policy.cooldown >= timedelta(0)
    assert timedelta(0) <= rules.stop_timeout <= timedelta(minutes=10)


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


names = st.text(
    st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=40
) | st.sampled_from(["$(touch /tmp/pwned)", "a;b|c&d", "`id`", "../../etc", "名前", "-rf", "\n"])


@EXAMPLES
@given(hostile=st.lists(st.tuples(names, label_sets), min_size=1, max_size=4))
def test_hostile_containers_never_stop_the_sweep_and_the_rest_keep_being_healed(
    hostile: list[tuple[str, dict[str, str]]],
) -> None:
    _tried("hostile_container_sets")
    clock = FakeClock()
    engine = FakeEngine(clock)
    good = engine.add("good-app", health="unhealthy")
    for i, (name, labels) in enumerate(hostile):
        engine.add(f"{name}#{i}", labels={"guardian.enable": "true", **labels}, health="unhealthy")
    with tempfile.TemporaryDirectory() as tmp:
        healer = make_app(
            Path(tmp),
            engine=engine,
            clock=clock,
            sqlite=SqliteStore(":memory:"),
            restart={
                "cooldown": "2s",
                "max_attempts": 3,
                "max_per_minute": 100,
                "max_concurrent": 100,
                "stop_timeout": "1s",
                "verify_timeout": "30s",
            },
            storm={"threshold": 100},  # every container here is unhealthy: no storm hold
        ).healer
    records = _Records()
    logger = logging.getLogger("guardian")
    logger.addHandler(records)
    try:
        report = healer.sweep()
    finally:
        logger.removeHandler(records)
    # Each line Guardian logged is one line in its real format, whatever the names and labels.
    formatter = LogfmtFormatter()
    for record in records.records:
        _assert_one_line(formatter.format(record))
    warned = {
        getattr(r, FIELDS)["container"] for r in records.records if r.msg == "bad label ignored"
    }
    for a in report.rows:
        if a.rules.warnings:
            assert a.snapshot.name in warned, f"no warning for {a.snapshot.name!r}"
    assert report.engine_error is None
    assert good.id in engine.restarts, "a hostile neighbour stopped the good container's heal"
    # Every opted-in hostile container was judged too (restarted under the global policy).
    watched = {a.snapshot.name for a in report.rows}
    assert "good-app" in watched
