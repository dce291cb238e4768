"""The notification channels of one receiver, built from its keys (a plain mapping) and a reader
of its secrets: where a new channel type is added. Bootstrap reads the config and says a
ChannelConfigError as a config error."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from guardian.adapters.notify.alertmanager import AlertmanagerNotifier
from guardian.adapters.notify.apprise import AppriseConfigError, apprise_channels
from guardian.adapters.notify.discord import DiscordNotifier
from guardian.adapters.notify.email import EmailNotifier
from guardian.adapters.notify.pagerduty import PagerDutyNotifier
from guardian.adapters.notify.slack_bot import SlackBotNotifier
from guardian.adapters.notify.slack_webhook import SlackWebhookNotifier
from guardian.adapters.notify.webhook import WebhookNotifier
from guardian.adapters.sqlite.outbox import SqliteOutbox
from guardian.core.redaction import Redactor
from guardian.ports import Clock, Notifier


class ChannelConfigError(ValueError):
    """A receiver's keys Guardian cannot build a channel from; the message names the keys,
    never a secret."""


def receiver_channels(
    spec: Mapping[str, Any],
    secret: Callable[[str], str | None],
    where: str,
    outbox: SqliteOutbox,
    clock: Clock,
    timeout: timedelta,
    pacing: timedelta,
    redact: Redactor,
) -> list[Notifier]:
    """One receiver's channels (one, or one per Apprise URL), named for the receiver. `where`
    names its keys in errors; `secret` reads one of its secrets. Raises ChannelConfigError."""
    name, kind = str(spec["name"]), spec["type"]
    legacy_name = where == "notify."
    match kind:
        case "slack":
            return [SlackWebhookNotifier(secret("url") or "", timeout, pacing, name=name)]
        case "slack_bot":
            return [_slack_bot(spec, secret, name, outbox, timeout, pacing)]
        case "discord":
            return [DiscordNotifier(secret("url") or "", timeout, pacing, name=name)]
        case "email":
            return [_email(spec, secret, name, timeout)]
        case "webhook":
            url = secret("url") or ""
            key = spec["json_key"]
            return [WebhookNotifier(url, secret("secret"), timeout, name=name, json_key=key)]
        case "alertmanager":
            redact.add_credentials_of(spec["url"])
            resend = spec["resend_interval"]
            return [AlertmanagerNotifier(spec["url"], outbox, clock, timeout, resend, name=name)]
        case "pagerduty":
            key = secret("routing_key") or ""
            return [PagerDutyNotifier(key, spec["url"], timeout, spec["events"], name=name)]
        case _:
            try:
                prefix = None if legacy_name else name
                return list(apprise_channels(secret("urls") or "", timeout, pacing, redact, prefix))
            except AppriseConfigError as exc:
                raise ChannelConfigError(f"{where}apprise_urls: {exc}") from None


def _slack_bot(
    spec: Mapping[str, Any],
    secret: Callable[[str], str | None],
    name: str,
    outbox: SqliteOutbox,
    timeout: timedelta,
    pacing: timedelta,
) -> SlackBotNotifier:
    """A Slack bot's channel: the token posts to the one Slack channel the receiver names."""
    token = secret("token") or ""
    if not spec["channel"]:
        raise ChannelConfigError("notify.slack_bot_channel: required with a Slack bot token")
    return SlackBotNotifier(
        token, spec["channel"], spec["api_url"], outbox, timeout, pacing, name=name
    )


def _email(
    spec: Mapping[str, Any], secret: Callable[[str], str | None], name: str, timeout: timedelta
) -> EmailNotifier:
    """An email channel: it needs a sender and at least one address to write to."""
    password = secret("password")
    to = [a.strip() for a in (spec["to"] or "").split(",") if a.strip()]
    if not to or not spec["from"]:
        raise ChannelConfigError(
            "notify.email_from and notify.email_to: required with email_smtp_host"
        )
    return EmailNotifier(
        spec["smtp_host"],
        spec["smtp_port"],
        spec["security"],
        spec["from"],
        to,
        timeout,
        spec["username"],
        password,
        name=name,
    )
