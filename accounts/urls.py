"""Account pages: ``/accounts/`` (API tokens), ``/accounts/signup/``, token revoke.

Mounted before ``django.contrib.auth.urls`` (login, logout, password change/reset).
"""

from django.urls import path

from . import views

urlpatterns = [
    path("", views.account, name="account"),
    path("login/", views.ThrottledLoginView.as_view(), name="login"),  # failed sign-ins limited
    path("signup/", views.signup, name="signup"),
    path("tokens/<int:token_id>/revoke/", views.token_revoke, name="token-revoke"),
]
