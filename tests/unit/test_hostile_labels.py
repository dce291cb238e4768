"""What a container's labels can ask for: bounded like the config keys (one table), probes that
cannot stall one another or aim anywhere but at the container, a runner that keeps its timeout."""

from __future__ import annotations

import socket
import threading
import time
from datetime import timedelta

import pytest

from guardian.adapters.probe_runner import run_probe
from guardian.config import SCHEMA
from guardian.core import labels as L
from guardian.core.detection.probes import ProbeSpec, parse_probe, probe_host
from guardian.core.detection.restart_policy import RestartPolicy
from guardian.core.limits import LIMITS
from guardian.core.model import ContainerSnapshot
from guardian.service.watchers.prober import Prober
from tests.fakes import FakeClock
from tests.helpers import wait_until

ON = {"guardian.enable": "true"}
DEFAULTS = ProbeSpec("http", "", 0, period=timedelta(seconds=10), timeout=timedelta(seconds=2))


def test_every_label_limit_is_its_config_keys_limit():
    for limit in LIMITS:
        section, key = limit.key.split(".")
        assert SCHEMA[section][key].allowed == limit.range.allowed, limit.key


@pytest.mark.parametrize(
    ("label", "value"),
    [
        ("guardian.probe.timeout", "365d"),  # the config key stops at 1m
        ("guardian.probe.timeout", "61s"),
        ("guardian.probe.period", "100ms"),  # probe.period starts at 1s
        ("guardian.probe.period", "2h"),
        ("guardian.probe.failure_threshold", "101"),
        ("guardian.probe.success_threshold", "0"),
    ],
)
def test_an_out_of_range_probe_label_is_one_warning_and_the_global_value(label, value):
    spec, warnings = parse_probe({"guardian.probe.tcp": ":5432", label: value}, DEFAULTS)
    assert spec is not None and spec == parse_probe({"guardian.probe.tcp": ":5432"}, DEFAULTS)[0]
    [warning] = warnings
    assert warning.startswith(f"label {label}={value!r}: expected ")


@pytest.mark.parametrize(
    ("label", "value"),
    [
        (L.STOP_TIMEOUT, "11m"),
        (L.MAX_ATTEMPTS, "1001"),
        (L.COOLDOWN, "366d"),
        (L.MAX_ATTEMPTS, "²"),
    ],
)
def test_an_out_of_range_rule_label_is_one_warning_and_the_global_value(label, value):
    base = RestartPolicy()
    rules = L.rules_for({label: value}, base, timedelta(seconds=10), "guardian.enable")
    assert rules.policy == base and rules.stop_timeout == timedelta(seconds=10)
    [warning] = rules.warnings
    assert warning.startswith(f"label {label}={value!r}: expected ")


LOOSER = {L.MAX_ATTEMPTS: "1000", L.COOLDOWN: "0s"}


def test_a_label_that_asks_for_more_than_the_operator_configured_is_refused():
    base = RestartPolicy(max_attempts=3, cooldown=timedelta(minutes=5))
    rules = L.rules_for({**ON, **LOOSER}, base, timedelta(seconds=10), "guardian.enable")
    assert rules.policy == base
    more, shorter = rules.warnings
    assert more.startswith("label guardian.max_attempts='1000': expected at most 3 ")
    assert shorter.startswith("label guardian.cooldown='0s': expected at least 5m ")
    assert all("labels.allow_loosen" in w for w in rules.warnings)


@pytest.mark.parametrize(
    ("labels", "max_attempts", "cooldown"),
    [
        ({L.MAX_ATTEMPTS: "1"}, 1, timedelta(minutes=5)),
        ({L.MAX_ATTEMPTS: "3"}, 3, timedelta(minutes=5)),  # the operator's own value
        ({L.COOLDOWN: "2h"}, 3, timedelta(hours=2)),
        ({L.COOLDOWN: "5m"}, 3, timedelta(minutes=5)),
    ],
)
def test_a_label_may_tighten_the_operators_policy(labels, max_attempts, cooldown):
    base = RestartPolicy(max_attempts=3, cooldown=timedelta(minutes=5))
    rules = L.rules_for(labels, base, timedelta(seconds=10), "guardian.enable")
    assert rules.warnings == ()
    assert (rules.policy.max_attempts, rules.policy.cooldown) == (max_attempts, cooldown)
    # A longer cooldown is never cut by the operator's cap on its growth.
    assert rules.policy.max_cooldown >= rules.policy.cooldown


@pytest.mark.parametrize(
    ("allowed", "max_attempts", "cooldown", "refused"),
    [
        (("max_attempts",), 1000, timedelta(minutes=5), L.COOLDOWN),
        (("cooldown",), 3, timedelta(0), L.MAX_ATTEMPTS),
        (("max_attempts", "cooldown"), 1000, timedelta(0), None),
    ],
)
def test_the_operator_allows_loosening_per_key(allowed, max_attempts, cooldown, refused):
    base = RestartPolicy(max_attempts=3, cooldown=timedelta(minutes=5))
    rules = L.rules_for(LOOSER, base, timedelta(seconds=10), "guardian.enable", may_loosen=allowed)
    assert (rules.policy.max_attempts, rules.policy.cooldown) == (max_attempts, cooldown)
    assert [w.split("=")[0] for w in rules.warnings] == ([f"label {refused}"] if refused else [])


def test_labels_allow_loosen_names_only_keys_a_label_can_loosen(tmp_path):
    from guardian.config import ConfigError, load_settings

    assert load_settings(None, env={})["labels.allow_loosen"] == ()
    env = {"GUARDIAN_LABELS_ALLOW_LOOSEN": "cooldown, max_attempts"}
    assert load_settings(None, env=env)["labels.allow_loosen"] == ("max_attempts", "cooldown")
    with pytest.raises(ConfigError) as bad:
        load_settings(None, env={"GUARDIAN_LABELS_ALLOW_LOOSEN": "stop_timeout"})
    assert "labels.allow_loosen" in str(bad.value) and "max_attempts, cooldown" in str(bad.value)


def test_a_label_cannot_take_more_restarts_than_the_operator_allows_unless_allowed(tmp_path):
    from tests.app import make_app
    from tests.fakes import FakeEngine

    def restarts(**config: dict[str, object]) -> int:
        clock = FakeClock()
        engine = FakeEngine(clock)
        engine.add("greedy", labels={**ON, **LOOSER}, health="unhealthy")
        engine.after_restart_health = "unhealthy"
        loop = make_app(
            tmp_path / str(len(list(tmp_path.iterdir()))),
            engine=engine,
            clock=clock,
            restart={"max_attempts": 2, "cooldown": "30s", "verify_timeout": "5s"},
            **config,
        )
        for _ in range(20):
            loop.healer.sweep()
            clock.advance(31)
            loop.verify()
        return len(engine.restarts)

    assert restarts() == 2
    assert restarts(labels={"allow_loosen": ["max_attempts", "cooldown"]}) > 2


def test_the_longest_values_a_label_can_say_are_accepted():
    spec, warnings = parse_probe(
        {"guardian.probe.http": "http://:80/", "guardian.probe.timeout": "1m"}, DEFAULTS
    )
    assert warnings == [] and spec is not None and spec.timeout == timedelta(minutes=1)
    rules = L.rules_for(
        {L.STOP_TIMEOUT: "10m"}, RestartPolicy(), timedelta(seconds=10), "guardian.enable"
    )
    assert rules.stop_timeout == timedelta(minutes=10) and rules.warnings == ()


@pytest.mark.parametrize(
    ("target", "addresses", "allow", "host"),
    [
        (":80", ("172.18.0.5",), (), "172.18.0.5"),  # its own address
        ("172.18.0.5:80", ("10.0.0.2", "172.18.0.5"), (), "172.18.0.5"),  # its second network
        ("127.0.0.1:22", ("172.18.0.5",), (), None),  # Guardian's loopback: refused
        ("127.0.0.1:22", ("127.0.0.1",), (), "127.0.0.1"),  # a host-network container
        (":80", (), (), None),  # network none: nothing of its own to probe
        ("10.1.2.3:80", ("172.18.0.5",), ("10.0.0.0/8",), "10.1.2.3"),  # allowed network
        ("db.internal:80", ("172.18.0.5",), ("DB.internal",), "db.internal"),  # allowed name
        ("db.internal:80", ("172.18.0.5",), ("10.0.0.0/8",), None),
    ],
)
def test_a_probe_aims_at_the_containers_own_addresses_unless_the_operator_allows_more(
    target, addresses, allow, host
):
    spec, _ = parse_probe({"guardian.probe.tcp": target}, DEFAULTS)
    assert spec is not None
    got, why = probe_host(spec, addresses, allow)
    assert got == host
    assert (why == "") == (host is not None)


def test_a_path_that_would_break_the_request_line_is_refused():
    spec, [warning] = parse_probe({"guardian.probe.http": "http://:80/a b"}, DEFAULTS)
    assert spec is None and "expected a URL" in warning


class GatedRunner:
    """Answers at once, except for hosts in `hang`, which wait until released."""

    def __init__(self, hang: set[str]) -> None:
        self.hang = hang
        self.release = threading.Event()
        self.runs: list[str] = []

    def run(self, spec: ProbeSpec, address: str) -> tuple[bool, str]:
        self.runs.append(address)
        if address in self.hang:
            self.release.wait(30)
            return True, f"{address} answered late"
        return False, f"{address} refused"


def snap(name: str, address: str, **labels: str) -> ContainerSnapshot:
    return ContainerSnapshot(
        f"{name}-id", name, {**ON, **labels}, "running", None, addresses=(address,)
    )


def test_a_probe_that_never_answers_costs_only_its_own_probe():
    clock = FakeClock()
    runner = GatedRunner(hang={"10.0.0.66"})
    prober = Prober(clock, runner, DEFAULTS)
    probe = {"guardian.probe.tcp": ":80", "guardian.probe.failure_threshold": "1"}
    prober.update([snap("hostile", "10.0.0.66", **probe), snap("web", "10.0.0.7", **probe)])
    try:
        assert prober.tick() == []  # starts both; waits for neither
        wait_until(lambda: prober.in_flight() == 1, 10, 0.01, "web's probe answered")
        assert prober.tick() == ["web-id"]  # web's failure counts while hostile still hangs
        # hostile's probe is judged failed at its timeout, and no second one piles up.
        clock.advance(DEFAULTS.timeout.total_seconds() + 3)
        assert prober.tick() == ["hostile-id"]
        clock.advance(DEFAULTS.period.total_seconds())
        prober.tick()
        assert runner.runs.count("10.0.0.66") == 1 and runner.runs.count("10.0.0.7") == 2
    finally:
        runner.release.set()
    # The late (passing) answer of the overdue probe is dropped: no flip back to healthy; the
    # next probe starts once the old thread is gone.
    wait_until(lambda: prober.in_flight() == 0, 10, 0.01, "hostile's thread ended")
    assert prober.tick() == []
    wait_until(lambda: runner.runs.count("10.0.0.66") == 2, 10, 0.01, "the next probe")


@pytest.fixture
def trickler():
    """A server that accepts, then sends one byte of a status line every 0.2 s, for ever."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            while not stop.wait(0.2):
                try:
                    conn.send(b"H")
                except OSError:
                    return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    server.close()


def test_a_target_that_trickles_bytes_gets_no_more_than_the_timeout(trickler):
    spec, _ = parse_probe(
        {"guardian.probe.http": f"http://:{trickler}/", "guardian.probe.timeout": "1s"}, DEFAULTS
    )
    assert spec is not None
    started = time.monotonic()
    passed, seen = run_probe(spec, "127.0.0.1")
    assert not passed and "timed out" in seen
    # http.client waited for a whole header line per read; now one deadline bounds the probe.
    assert time.monotonic() - started < 5


def test_a_containers_addresses_are_every_network_and_the_loopback_on_the_host_network():
    from guardian.adapters.engine.engine_payloads import addresses

    two = {
        "Networks": {
            "b": {"IPAddress": "10.0.0.2", "GlobalIPv6Address": "fd00::2"},
            "a": {"IPAddress": "172.18.0.5"},
        }
    }
    assert addresses(two, "bridge") == ("172.18.0.5", "10.0.0.2", "fd00::2")
    assert addresses({"Networks": {"host": {}}}, "host") == ("127.0.0.1",)
    assert addresses({"Networks": {"none": {"IPAddress": ""}}}, "none") == ()
