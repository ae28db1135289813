"""OpenAPI description of ApiTokenAuthentication for drf-spectacular."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = "accounts.authentication.ApiTokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "A token from your account page (`/accounts/`) or `manage.py issue_token`, "
            "sent as `Token <token>` (`Bearer <token>` is accepted too).",
        }
