"""The engine's connections on a Unix socket (adapters/engine/light_http.py): kept while whole
answers come back, one per request in flight, never one given back after a close, a failure for
a broken or oversized answer, never a wait beyond the timeout. Then DockerEngine.record through
them: the SDK's inspect, its answers and its failures (the SDK still connects and negotiates the
API version with the fake engine)."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from guardian.adapters.engine.docker_engine import DockerEngine
from guardian.adapters.engine.light_http import KEEP, AnswerTooLarge, LightHttp, PingFailed
from guardian.ports import EngineUnavailable
from tests.fakes import FakeClock

DATE = "Sun, 06 Dec 2026 05:00:00 GMT"


class Cut(bytes):
    """An answer after which the fake engine closes the connection."""


Reply = bytes | None | Callable[[str], bytes | None]


class FakeEngine:
    """A Unix socket answering each request with `answer` (None: never answers; a function: of
    the request's path); records which connection (numbered from 1) carried which path."""

    def __init__(self, path: Path, answer: Reply) -> None:
        self.answer = answer
        self.log: list[tuple[int, str]] = []
        self.connections = 0
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(8)
        self.open: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def requests(self) -> int:
        return len(self.log)

    def carried(self, fragment: str) -> set[int]:
        """The connections that carried a request whose path holds `fragment`."""
        with self._lock:
            return {n for n, path in self.log if fragment in path}

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
                self.open.append(conn)
                number = self.connections
            threading.Thread(target=self._serve, args=(conn, number), daemon=True).start()

    def _serve(self, conn: socket.socket, number: int) -> None:
        data = b""
        while True:
            try:
                chunk = conn.recv(4096)
            except OSError:
                return
            if not chunk:
                return
            data += chunk
            while b"\r\n\r\n" in data:
                head, _, data = data.partition(b"\r\n\r\n")
                path = head.split(b" ")[1].decode()
                with self._lock:
                    self.log.append((number, path))
                reply = self.answer(path) if callable(self.answer) else self.answer
                if reply is not None:
                    conn.sendall(reply)
                if isinstance(reply, Cut):
                    conn.close()
                    return

    def hang_up(self) -> None:
        """Closes every connection from the engine's side (an engine restarted, say)."""
        with self._lock:
            for conn in self.open:
                with contextlib.suppress(OSError):  # closed already
                    conn.shutdown(socket.SHUT_RDWR)
                conn.close()

    def close(self) -> None:
        self.server.close()
        for conn in self.open:
            conn.close()


def answer(
    status: str = "200 OK", body: bytes = b"OK", extra: str = "", date: str | None = DATE
) -> bytes:
    """An HTTP/1.1 answer with a Content-Length."""
    dated = f"Date: {date}\r\n" if date else ""
    head = f"HTTP/1.1 {status}\r\n{dated}Content-Length: {len(body)}\r\n{extra}\r\n"
    return head.encode() + body


def chunked(body: bytes, size: int = 7, date: str | None = DATE) -> bytes:
    """An HTTP/1.1 answer in chunks of `size` bytes."""
    dated = f"Date: {date}\r\n" if date else ""
    parts = [body[i : i + size] for i in range(0, len(body), size)]
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts)
    head = f"HTTP/1.1 200 OK\r\n{dated}Transfer-Encoding: chunked\r\n\r\n"
    return head.encode() + chunks + b"0\r\n\r\n"


def ok(extra: str = "") -> bytes:
    return answer(extra=extra + "Content-Type: text/plain\r\n")


@contextlib.contextmanager
def serving(
    sock: Path,
    answers: Reply,
    timeout: float = 2.0,
    saw_date: Callable[[str | None, float], None] = lambda *_: None,
    keep: int = KEEP,
) -> Iterator[tuple[FakeEngine, LightHttp]]:
    """A fake engine at `sock` answering `answers`, and a LightHttp to it; both closed after."""
    engine = FakeEngine(sock, answers)
    light = LightHttp(str(sock), timeout, saw_date, keep=keep)
    try:
        yield engine, light
    finally:
        light.close()
        engine.close()


@pytest.fixture
def sock(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "engine.sock"


def test_pings_share_one_connection_and_each_hears_the_engines_date(sock: Path) -> None:
    dates: list[str | None] = []
    with serving(sock, ok(), saw_date=lambda date, _: dates.append(date)) as (engine, ping):
        for _ in range(5):
            ping.ping()
        assert (engine.connections, engine.requests) == (1, 5)
        assert dates == [DATE] * 5


def test_an_answer_that_closes_is_not_kept(sock: Path) -> None:
    with serving(sock, ok("Connection: close\r\n")) as (engine, ping):
        ping.ping()
        ping.ping()
        assert engine.connections == 2


def test_anything_but_200_fails_the_ping_and_the_next_one_is_answered(sock: Path) -> None:
    with serving(sock, answer("500 Internal Server Error", b"")) as (engine, ping):
        with pytest.raises(PingFailed, match="500"):
            ping.ping()
        engine.answer = ok()
        ping.ping()
        assert engine.requests == 2


def test_a_ping_longer_than_an_engines_fails(sock: Path) -> None:
    with serving(sock, answer(body=b"O" * 2000)) as (_, ping), pytest.raises(AnswerTooLarge):
        ping.ping()


def test_an_engine_that_never_answers_fails_within_the_timeout(sock: Path) -> None:
    with serving(sock, None, timeout=0.3) as (_, ping), pytest.raises(TimeoutError):
        ping.ping()


def test_a_broken_answer_or_no_socket_fails(sock: Path) -> None:
    garbage = b"garbage\r\n\r\n"
    with serving(sock, garbage, timeout=1.0) as (_, ping), pytest.raises(http.client.HTTPException):
        ping.ping()
    with pytest.raises(OSError):
        LightHttp(str(sock.with_name("none.sock")), 1.0, lambda *_: None).ping()


def test_a_get_reads_an_answer_with_a_length_or_in_chunks_on_one_connection(sock: Path) -> None:
    body = b'{"Id": "abc", "Name": "/web"}'
    with serving(sock, answer(body=body)) as (engine, light):
        assert light.get("/x", 1024) == (200, body)
        engine.answer = chunked(body)
        assert light.get("/x", 1024) == (200, body)
        engine.answer = answer("404 Not Found", b'{"message": "no such container"}')
        assert light.get("/x", 1024).status == 404
        assert light.get("/x", 1024).status == 404
        assert (engine.connections, engine.requests) == (1, 4)


def test_an_answer_beyond_the_bound_is_refused_whether_announced_or_chunked(sock: Path) -> None:
    with serving(sock, answer(body=b"x" * 101)) as (engine, light):
        with pytest.raises(AnswerTooLarge, match="more than 100 bytes"):
            light.get("/x", 100)
        engine.answer = chunked(b"x" * 101, size=10)
        with pytest.raises(AnswerTooLarge, match="more than 100 bytes"):
            light.get("/x", 100)
        engine.answer = chunked(b"x" * 100, size=10)
        assert light.get("/x", 100).body == b"x" * 100
        assert engine.connections == 3  # a refused answer's connection is not kept


def test_an_answer_cut_mid_body_fails_and_the_next_get_connects_again(sock: Path) -> None:
    body = b'{"Id": "abc"}'
    whole = answer(body=body)
    with serving(sock, Cut(whole[:-5])) as (engine, light):
        with pytest.raises(http.client.IncompleteRead):
            light.get("/x", 1024)
        engine.answer = Cut(chunked(body)[:-12])
        with pytest.raises(http.client.IncompleteRead):
            light.get("/x", 1024)
        engine.answer = whole
        assert light.get("/x", 1024).body == body
        assert engine.connections == 3


def test_a_connection_the_engine_closed_while_idle_is_not_used_again(sock: Path) -> None:
    with serving(sock, ok()) as (engine, light):
        light.ping()
        engine.hang_up()
        light.ping()
        assert engine.connections == 2


def pings_at_once(light: LightHttp, engine: FakeEngine, count: int) -> None:
    """`count` pings from as many threads, none answered before all of them arrived."""
    together = threading.Barrier(count, timeout=5)

    def held(path: str) -> bytes:
        together.wait()
        return ok()

    engine.answer = held
    failures: list[BaseException] = []

    def ping() -> None:
        try:
            light.ping()
        except (OSError, http.client.HTTPException, PingFailed) as exc:
            failures.append(exc)

    threads = [threading.Thread(target=ping) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert failures == []


def test_requests_in_flight_at_once_each_have_a_connection_and_a_few_are_kept(
    sock: Path,
) -> None:
    with serving(sock, ok(), keep=4) as (engine, light):
        pings_at_once(light, engine, 6)
        assert engine.connections == 6
        pings_at_once(light, engine, 5)
        assert engine.connections == 7  # the four kept, and one more


def test_a_connection_in_use_at_a_close_is_not_kept_after_it(sock: Path) -> None:
    asked, release = threading.Event(), threading.Event()

    def held(path: str) -> bytes:
        asked.set()
        release.wait(5)
        return ok()

    engine = FakeEngine(sock, held)
    light = LightHttp(str(sock), 2.0, lambda *_: None)
    thread = threading.Thread(target=light.ping)
    try:
        thread.start()
        assert asked.wait(5)
        light.close()
        release.set()
        thread.join(5)
        light.ping()
        assert engine.connections == 2
    finally:
        release.set()
        light.close()
        engine.close()


# -- DockerEngine.record on a Unix socket -------------------------------------------------------

API = "1.43"  # what the fake engine offers, so not the SDK's default
VERSION = json.dumps({"ApiVersion": API, "Version": "27.0.0", "Components": []}).encode()
RECORD = {"Id": "abc123", "Name": "/web", "State": {"Status": "running"}}
INSPECT = f"/v{API}/containers/"


def engine_with(inspect: bytes | Callable[[str], bytes | None]) -> Callable[[str], bytes | None]:
    """The fake engine's answers: its version undated (only the inspects bring the engine's
    clock), a ping, and `inspect` for /containers/<id>/json."""

    def answers(path: str) -> bytes | None:
        if path.startswith(INSPECT):
            return inspect(path) if callable(inspect) else inspect
        if path.endswith("/version"):
            return answer(body=VERSION, date=None)
        return answer(date=None)

    return answers


def record(body: Any = RECORD) -> bytes:
    return answer(body=json.dumps(body).encode())


@pytest.fixture
def fake(sock: Path) -> Iterator[FakeEngine]:
    engine = FakeEngine(sock, engine_with(record()))
    yield engine
    engine.close()


@pytest.fixture
def docker(sock: Path, fake: FakeEngine) -> Iterator[DockerEngine]:
    engine = DockerEngine(f"unix://{sock}", timedelta(seconds=2), FakeClock())
    yield engine
    engine.close()


def test_an_inspect_returns_the_engines_record_at_the_negotiated_api_version(
    fake: FakeEngine, docker: DockerEngine
) -> None:
    assert docker.record("abc123") == RECORD
    assert docker.record("we b") == RECORD
    inspects = [path for _, path in fake.log if "/containers/" in path]
    assert inspects == [f"{INSPECT}abc123/json", f"{INSPECT}we%20b/json"]


def test_an_inspect_of_a_gone_container_is_none(fake: FakeEngine, docker: DockerEngine) -> None:
    fake.answer = engine_with(answer("404 Not Found", b'{"message": "No such container: x"}'))
    assert docker.record("x") is None
    assert docker.inspect("x") is None


def test_a_record_that_is_not_an_object_is_none(fake: FakeEngine, docker: DockerEngine) -> None:
    fake.answer = engine_with(record([1, 2]))
    assert docker.record("abc123") is None


def test_a_refused_inspect_names_the_engines_message_bounded(
    fake: FakeEngine, docker: DockerEngine
) -> None:
    fake.answer = engine_with(answer("500 Internal Server Error", b'{"message": "boom"}'))
    with pytest.raises(EngineUnavailable, match=r"^docker engine refused to inspect: boom$"):
        docker.record("abc123")
    long = json.dumps({"message": "x" * 5000}).encode()
    fake.answer = engine_with(answer("500 Internal Server Error", long))
    with pytest.raises(EngineUnavailable) as refused:
        docker.record("abc123")
    assert len(str(refused.value)) < 300
    fake.answer = engine_with(answer("403 Forbidden", b"denied by the proxy\n"))
    with pytest.raises(EngineUnavailable, match=r"inspect: denied by the proxy$"):
        docker.record("abc123")


def test_sequential_inspects_share_one_kept_connection(
    fake: FakeEngine, docker: DockerEngine
) -> None:
    for _ in range(3):
        assert docker.record("abc123") == RECORD
    assert len(fake.carried("/containers/")) == 1
    assert fake.carried("/containers/").isdisjoint(fake.carried("/version"))  # not the SDK's


def test_two_inspects_at_once_use_two_connections(fake: FakeEngine, docker: DockerEngine) -> None:
    together = threading.Barrier(2, timeout=5)

    def held(path: str) -> bytes:
        together.wait()  # the first answer waits for the second request
        return record()

    docker.identity()  # connected before the threads start
    fake.answer = engine_with(held)
    results: list[Any] = []

    def inspect() -> None:
        try:
            results.append(docker.record("abc123"))
        except EngineUnavailable as exc:
            results.append(exc)

    threads = [threading.Thread(target=inspect) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert results == [RECORD, RECORD]
    assert len(fake.carried("/containers/")) == 2


def test_an_answer_cut_mid_body_is_unavailable_and_the_next_inspect_connects_again(
    fake: FakeEngine, docker: DockerEngine
) -> None:
    fake.answer = engine_with(Cut(record()[:-4]))
    with pytest.raises(EngineUnavailable, match="unreachable"):
        docker.record("abc123")
    fake.answer = engine_with(record())
    assert docker.record("abc123") == RECORD
    assert len(fake.carried("/containers/")) == 2


def test_an_answer_in_chunks_is_read_whole(fake: FakeEngine, docker: DockerEngine) -> None:
    big = {**RECORD, "Config": {"Env": [f"V{i}=x" for i in range(2000)]}}
    fake.answer = engine_with(chunked(json.dumps(big).encode(), size=1000))
    assert docker.record("abc123") == big


def test_an_answer_that_is_not_json_is_unavailable(fake: FakeEngine, docker: DockerEngine) -> None:
    fake.answer = engine_with(answer(body=b"{not json"))
    with pytest.raises(EngineUnavailable, match="unreachable"):
        docker.record("abc123")
    fake.answer = engine_with(answer(body=b"[" * 100_000))
    with pytest.raises(EngineUnavailable, match="unreachable"):
        docker.record("abc123")


def test_an_answer_announcing_more_than_the_bound_is_refused_unread(
    fake: FakeEngine, docker: DockerEngine
) -> None:
    huge = b"HTTP/1.1 200 OK\r\nContent-Length: 1000000000\r\n\r\n{"
    fake.answer = engine_with(huge)
    refused = "with 1000000000 bytes, more than 67108864 bytes: refused"
    with pytest.raises(EngineUnavailable, match=refused):
        docker.record("abc123")
    fake.answer = engine_with(record())
    assert docker.record("abc123") == RECORD


def test_the_engines_date_on_an_inspect_reaches_the_engine_clock(
    fake: FakeEngine, docker: DockerEngine
) -> None:
    docker.identity()
    assert docker.engine_clock.uncertainty is None  # the fake's version carries no Date
    docker.record("abc123")
    assert docker.engine_clock.uncertainty is not None
    assert docker.engine_clock.skew > timedelta(days=300)  # DATE, against FakeClock's T0
    assert DATE.startswith("Sun, 06 Dec 2026")


def test_an_engine_gone_between_inspects_is_unavailable_with_the_reason(
    sock: Path, fake: FakeEngine, docker: DockerEngine
) -> None:
    docker.record("abc123")
    fake.hang_up()
    fake.close()
    sock.unlink()
    with pytest.raises(EngineUnavailable, match="no socket at"):
        docker.record("abc123")


# -- DockerEngine's list on a Unix socket -------------------------------------------------------

LIST = f"/v{API}/containers/json?"


def listed(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "Id": f"{name}-id",
        "Names": [f"/{name}"],
        "Labels": labels,
        "State": "running",
        "Status": "Up 5 minutes (healthy)",
        "HostConfig": {"NetworkMode": "bridge"},
        "NetworkSettings": {"Networks": {}},
    }


def lists(body: bytes) -> Callable[[str], bytes | None]:
    """The fake engine answering `body` to a list of containers."""
    inspects = engine_with(record())

    def answers(path: str) -> bytes | None:
        return body if path.startswith(LIST) else inspects(path)

    return answers


def test_a_list_is_read_on_a_kept_connection_with_the_sdks_query(
    fake: FakeEngine, docker: DockerEngine
) -> None:
    items = [listed("web", {"guardian.enable": "true"}), listed("db", {"guardian.enable": "true"})]
    fake.answer = lists(answer(body=json.dumps(items).encode()))
    snaps = docker.list_containers("guardian.enable=true")
    assert [(s.name, s.health, s.state) for s in snaps] == [
        ("web", "healthy", "running"),
        ("db", "healthy", "running"),
    ]
    assert docker.list_containers("guardian.enable=true", ids=["db-id"])[0].name == "db"
    [whole, by_id] = [path for _, path in fake.log if path.startswith(LIST)]
    filters = {"label": ["guardian.enable=true"]}
    assert whole == LIST + urlencode(
        {"limit": -1, "all": 1, "size": 0, "trunc_cmd": 0, "filters": json.dumps(filters)}
    )
    assert json.loads(parse_qs(urlsplit(by_id).query)["filters"][0]) == {
        **filters,
        "id": ["db-id"],
    }
    assert len({n for n, path in fake.log if path.startswith(LIST)}) == 1  # one connection


def test_a_refused_or_strange_list_is_unavailable_and_items_without_an_id_are_left_out(
    fake: FakeEngine, docker: DockerEngine
) -> None:
    fake.answer = lists(answer("500 Internal Server Error", b'{"message": "boom"}'))
    with pytest.raises(EngineUnavailable, match="refused to list containers: boom"):
        docker.list_containers("guardian.enable=true")
    fake.answer = lists(answer("404 Not Found", b'{"message": "page not found"}'))
    with pytest.raises(EngineUnavailable, match="refused to list containers: page not found"):
        docker.list_containers("guardian.enable=true")
    fake.answer = lists(answer(body=b'{"not": "a list"}'))
    with pytest.raises(EngineUnavailable, match="not a list"):
        docker.list_containers("guardian.enable=true")
    odd = [listed("web", {}), {"Names": ["/no-id"]}, "text"]
    fake.answer = lists(answer(body=json.dumps(odd).encode()))
    assert [s.name for s in docker.list_containers("guardian.enable=true")] == ["web"]
