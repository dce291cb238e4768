"""The secrets check itself: it must find a secret wherever it shows, or it proves nothing."""

from __future__ import annotations

from tests.faults.exposure import SECRET_SOURCES, Exposure


def test_the_check_finds_each_configured_secret_in_any_exposed_text() -> None:
    for name, value in SECRET_SOURCES.items():
        exposure = Exposure()
        exposure.add("a log line", "level=info msg=ok")
        exposure.add("a metric", f'guardian_x{{url="{value}"}} 1'.encode())
        assert exposure.leaks() == [f"{name} secret appears in a metric"]


def test_every_configured_secret_is_a_fresh_unguessable_value() -> None:
    values = list(SECRET_SOURCES.values())
    assert len(set(values)) == len(values)
    assert all(len(v) >= 24 for v in values)
