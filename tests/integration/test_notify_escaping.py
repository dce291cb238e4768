"""A container's health output is data in every message: through the real transport, to fake
Slack and Discord webhooks on 127.0.0.1, it mentions nobody and links nowhere."""

from __future__ import annotations

import re
from typing import Any

from tests.helpers import wait_until
from tests.integration.notify_helpers import notifying, run
from tests.messages import slack_mrkdwn, unescaped
from tests.receiver import receiver

ATTACK = "<!channel> <@U024BE7LH> <https://evil.example/reset|Reset your password>"
SECRET = "gdtSecretEscaping0123456789"


def opened(rx: Any, prefix: str) -> list[Any]:
    return [r.json for r in rx.answered() if r.path.startswith(prefix)]


def test_hostile_health_output_pings_nobody_and_links_nowhere(containers, guardian):
    name = run(containers, "hostile", health_cmd=f"echo '{ATTACK}'; exit 1")
    with receiver() as rx:
        env = {"GDT_SLACK": rx.url(f"/slack/{SECRET}"), "GDT_DISCORD": rx.url(f"/discord/{SECRET}")}
        notify = {
            "slack_webhook_url_env": "GDT_SLACK",
            "discord_webhook_url_env": "GDT_DISCORD",
            "group_wait": "0s",
        }
        with notifying(guardian, notify, env, absent=(SECRET,)) as make:
            make(restart={"dry_run": True})
            wait_until(
                lambda: opened(rx, "/slack/") and opened(rx, "/discord/"),
                30,
                message="the incident told to Slack and Discord",
            )
    [slack] = opened(rx, "/slack/")
    texts = slack_mrkdwn(slack)
    assert any("&lt;!channel&gt; &lt;@U024BE7LH&gt; &lt;https://evil" in t for t in texts)
    for text in texts:  # Slack parses <...> as a mention or a link anywhere in these
        assert not re.search(r"<[!@#]|<https?:", text), text
    assert name in slack["text"]

    [discord] = opened(rx, "/discord/")
    assert discord["allowed_mentions"] == {"parse": []}
    values = [discord["content"]] + [f["value"] for f in discord["embeds"][0]["fields"]]
    assert any("Reset your password" in v for v in values)
    for value in values:
        assert unescaped(value) == [], value  # no [label](url), no <@id>, no @everyone
