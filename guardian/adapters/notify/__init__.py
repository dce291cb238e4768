"""Notification channels: one module each, all behind ports.Notifier, and a receiver's channels from
its keys (channels.py). The worker that drains the outbox is the service's (service/outbound)."""
