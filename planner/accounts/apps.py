from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """Sign-up and named API tokens (app label ``accounts``)."""

    name = "planner.accounts"
    label = "accounts"
    verbose_name = "Accounts and API tokens"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registers the OpenAPI description of ApiTokenAuthentication with drf-spectacular.
        from . import schema  # noqa: F401
