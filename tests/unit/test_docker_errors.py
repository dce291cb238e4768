"""Translation of Docker SDK and transport errors into typed outcomes (one place: classify)."""

from __future__ import annotations

import grp
import os
import pwd
import socket
from datetime import UTC, datetime
from pathlib import Path

import docker.errors
import pytest
import requests
import urllib3.exceptions

from guardian.adapters.engine.docker_engine import classify
from guardian.adapters.engine.engine_errors import permission_denied, socket_denied
from guardian.adapters.engine.engine_payloads import health_from_status, parse_time
from guardian.core.model import Outcome


def api_error(status: int, cls: type[docker.errors.APIError] = docker.errors.APIError):
    response = requests.Response()
    response.status_code = status
    return cls("engine said no", response=response, explanation="engine said no")


def refused() -> requests.exceptions.ConnectionError:
    cause = urllib3.exceptions.NewConnectionError(None, "connection refused")  # type: ignore[arg-type]
    cause.__cause__ = ConnectionRefusedError(111, "Connection refused")
    return requests.exceptions.ConnectionError(urllib3.exceptions.MaxRetryError(None, "/", cause))  # type: ignore[arg-type]


def cut_mid_request() -> requests.exceptions.ConnectionError:
    cause = urllib3.exceptions.ProtocolError(
        "Connection aborted.", ConnectionResetError(104, "reset")
    )
    return requests.exceptions.ConnectionError(cause)


@pytest.mark.parametrize(
    ("exc", "outcome", "retryable"),
    [
        (api_error(404, docker.errors.NotFound), Outcome.PERMANENT_FAILURE, False),
        (api_error(403), Outcome.POLICY_DENIED, False),
        (api_error(500), Outcome.TRANSIENT_FAILURE, True),
        (api_error(503), Outcome.TRANSIENT_FAILURE, True),
        (api_error(409), Outcome.TRANSIENT_FAILURE, True),
        (api_error(400), Outcome.PERMANENT_FAILURE, False),
        (refused(), Outcome.TRANSIENT_FAILURE, True),
        (
            requests.exceptions.ConnectionError(FileNotFoundError(2, "No such file")),
            Outcome.TRANSIENT_FAILURE,
            True,
        ),
        (requests.exceptions.ConnectTimeout(), Outcome.TRANSIENT_FAILURE, True),
        (requests.exceptions.ReadTimeout(), Outcome.UNKNOWN, False),
        (cut_mid_request(), Outcome.UNKNOWN, False),
        (TimeoutError(), Outcome.UNKNOWN, False),
    ],
    ids=[
        "404",
        "403",
        "500",
        "503",
        "409",
        "400",
        "refused",
        "no-socket",
        "connect-timeout",
        "read-timeout",
        "reset-after-send",
        "socket-timeout",
    ],
)
def test_errors_become_typed_outcomes(exc, outcome, retryable) -> None:
    result = classify(exc)
    assert (result.outcome, result.retryable) == (outcome, retryable)


def test_unexpected_errors_are_not_swallowed() -> None:
    with pytest.raises(ZeroDivisionError):
        classify(ZeroDivisionError())


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-30T05:29:27.311452315Z", datetime(2026, 11, 30, 5, 29, 27, 311452, UTC)),
        ("2026-11-30T05:29:27Z", datetime(2026, 11, 30, 5, 29, 27, tzinfo=UTC)),
        ("0001-01-01T00:00:00Z", None),
        ("", None),
        ("garbage", None),
    ],
)
def test_docker_timestamps(text, expected) -> None:
    assert parse_time(text) == expected


@pytest.mark.parametrize(
    ("status", "health"),
    [
        ("Up 5 minutes (unhealthy)", "unhealthy"),
        ("Up 2 seconds (health: starting)", "starting"),
        ("Up 1 hour (healthy)", "healthy"),
        ("Up 1 hour", None),
        ("Exited (1) 3 minutes ago", None),
    ],
)
def test_health_from_the_list_status(status, health) -> None:
    assert health_from_status(status) == health


def test_a_permission_error_deep_in_the_chain_is_recognised() -> None:
    # What requests raises when the socket refuses the connect (the docker SDK passes it on).
    denied = requests.exceptions.ConnectionError(
        urllib3.exceptions.ProtocolError(
            "Connection aborted.", PermissionError(13, "Permission denied")
        )
    )
    assert permission_denied(denied)
    assert not permission_denied(refused())


def test_a_refused_socket_is_explained_with_its_group_mode_and_who_guardian_is(
    tmp_path: Path,
) -> None:
    path = tmp_path / "docker.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        os.chmod(path, 0o660)
        st = path.stat()

        line = socket_denied(str(path))

    assert line.startswith(f"permission denied on {path} (owner ")
    assert f"group {grp.getgrgid(st.st_gid).gr_name} (gid {st.st_gid})" in line
    assert "mode 0660" in line and f"guardian runs as {pwd.getpwuid(os.geteuid()).pw_name}" in line
    assert f"give it the socket's group (gid {st.st_gid}" in line and line.endswith("restart it")
    assert "\n" not in line
