"""The accounts app: sign-up, named API tokens and their DRF authentication.

Its own top-level app (not part of ``planner``), so that the catalog
(``gpuprofiles``) and the planner both authenticate tokens without either
importing the other.
"""

from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """Sign-up, named API tokens and token authentication (app label ``accounts``)."""

    name = "accounts"
    label = "accounts"
    verbose_name = "Accounts and API tokens"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registers the OpenAPI description of ApiTokenAuthentication with drf-spectacular. A lazy import
        # genuinely needed: the extension module imports DRF, which reads settings and models, so it may
        # only load once the app registry is ready (Django's documented place for it is ready()).
        from . import schema  # noqa: F401
