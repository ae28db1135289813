"""Django project configuration for KV Planner (settings, urls, Celery app, wsgi)."""

from .celery import app as celery_app

__all__ = ("celery_app",)
