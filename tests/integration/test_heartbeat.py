"""The heartbeat end to end: a real `guardian run` pings a fake push monitor on 127.0.0.1 at its
interval while all is well, pings the failure URL while its engine is unreachable (a docker.url
nothing listens on: the shared engine is never touched), and nothing while it is stopped."""

from __future__ import annotations

import itertools
import time

from tests.helpers import wait_until
from tests.receiver import free_port, receiver

TOKEN = "gdtSecretBeat0123456789"
PING = f"/ping/{TOKEN}"


def heartbeat(rx, **extra):
    env = {"GDT_BEAT": rx.url(PING)}
    section = {"url_env": "GDT_BEAT", "interval": "2s", "timeout": "1s", **extra}
    return env, section


def pings(rx, path):
    return [r for r in list(rx.requests) if r.path == path]


def test_pinged_at_its_interval_while_well_and_never_while_stopped(guardian):
    with receiver() as rx:
        env, section = heartbeat(rx)
        g = guardian(env=env, watch={"interval": "500ms"}, heartbeat=section)
        wait_until(lambda: len(pings(rx, PING)) >= 4, 20, message="four pings")
        assert g.stop() == 0
        seen = list(rx.requests)
        assert all(r.method == "GET" and r.path == PING for r in seen)
        gaps = [b.at - a.at for a, b in itertools.pairwise(seen)]
        # Once per interval (2 s), although a sweep ends every 0.5 s; late by a sweep at most.
        assert all(1.9 <= gap <= 3.5 for gap in gaps), gaps

        # Stopped for two intervals while the receiver listens: no ping arrives. An absence
        # takes a window to see: this window is what is measured, not a wait for an effect.
        stopped = time.monotonic()
        while time.monotonic() - stopped < 2 * 2.0:
            assert len(rx.requests) == len(seen)
            time.sleep(0.1)
        g.start()
        wait_until(lambda: len(rx.requests) > len(seen), 20, message="a ping after the start")
    assert TOKEN not in g.full_log()


def test_the_failure_url_while_the_engine_is_unreachable(guardian):
    with receiver() as rx:
        env, section = heartbeat(rx)
        unreachable = {"url": f"tcp://127.0.0.1:{free_port()}", "timeout": "1s"}
        g = guardian(env=env, docker=unreachable, watch={"interval": "500ms"}, heartbeat=section)
        wait_until(lambda: len(pings(rx, PING + "/fail")) >= 2, 20, message="two failure pings")
        assert pings(rx, PING) == []  # never "all is well" while the engine does not answer
        fails = pings(rx, PING + "/fail")
        assert fails[1].at - fails[0].at >= 1.9
        assert g.stop() == 0
    assert TOKEN not in g.full_log()
