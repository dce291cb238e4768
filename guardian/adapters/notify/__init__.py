"""Notification channels (one module each, all behind ports.Notifier) and the delivery worker."""
