"""Account pages: sign up, and the account page listing API tokens (create, revoke).

Sign in and sign out are Django's own views (``django.contrib.auth.urls``) with the
templates in ``templates/registration/``.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods

from config import throttling
from config.form_errors import attach_errors
from simulator.base.errors import FieldError

from .forms import SignUpForm, TokenCreateForm
from .services import api_token_create, api_token_list, api_token_revoke


class ThrottledLoginView(LoginView):
    """Django's sign-in, refusing (429) an IP or user name past ``LOGIN_FAILURES`` failed attempts."""

    def post(self, request, *args, **kwargs):
        username = request.POST.get("username", "")
        wait = throttling.login_blocked(request, username)
        if wait is not None:
            return throttling.too_many_logins(wait)
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form):
        throttling.login_failed(self.request, self.request.POST.get("username", ""))
        return super().form_invalid(form)


def signup(request):
    """Create an account and sign in; closed when ``SIGNUP_OPEN`` is off, ``THROTTLE_SIGNUPS`` accounts per IP."""
    if request.user.is_authenticated:
        return redirect("account")
    if not settings.SIGNUP_OPEN:
        return render(request, "registration/signup.html", {"signup_closed": True, "nav": "account"}, status=403)
    next_url = request.POST.get("next") or request.GET.get("next") or ""
    if not url_has_allowed_host_and_scheme(
        next_url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        next_url = ""
    if request.method == "POST":
        form = SignUpForm(request.POST)
        if form.is_valid():
            wait = throttling.hit("signups", f"ip-{throttling.client_ip(request)}", settings.THROTTLE_SIGNUPS)
            if wait is not None:
                return throttling.too_many(wait, "This address has created as many accounts as the site allows "
                                                 "for now.")
            user = form.save()
            login(request, user, backend="django.contrib.auth.backends.ModelBackend")
            messages.success(request, f"Welcome, {user.username}. You are signed in.")
            return redirect(next_url or reverse("account"))
    else:
        form = SignUpForm()
    return render(request, "registration/signup.html", {"form": form, "next": next_url, "nav": "account"})


@login_required
def account(request):
    """The signed-in user's page: their API tokens, and a form to create one.

    A new token is shown once, on the page answering the POST that created it (it is
    not stored, and not put in a redirect or a message).
    """
    new_token = None
    if request.method == "POST":
        form = TokenCreateForm(request.POST)
        if form.is_valid():
            try:
                token, new_token = api_token_create(user=request.user, name=form.cleaned_data["name"])
            except FieldError as exc:  # at the name, the form's one field
                attach_errors(form, exc, by_name=True, paths="never")
            else:
                form = TokenCreateForm()
                messages.success(request, f"Token {token.name!r} created. Copy it now: it will not be shown again.")
    else:
        form = TokenCreateForm()
    context = {
        "form": form,
        "tokens": api_token_list(user=request.user),
        "new_token": new_token,
        "nav": "account",
    }
    response = render(request, "accounts/account.html", context)
    if new_token:
        response["Cache-Control"] = "no-store"
    return response


@login_required
@require_http_methods(["GET", "POST"])
def token_revoke(request, token_id: int):
    """GET: the confirmation page (scripts using the token are refused from then on); POST, from its button:
    revoke one of the user's tokens. Another user's token id changes nothing."""
    if request.method == "GET":
        token = api_token_list(user=request.user).filter(pk=token_id).first()
        if token is None:
            messages.error(request, "No such token (already revoked?).")
            return redirect("account")
        return render(request, "confirm.html", {
            "title": f"Revoke {token.name}?", "heading": f"Revoke the API token “{token.name}”?",
            "consequences": [f"Every script or machine sending the token that starts with {token.prefix}… is refused "
                             "from its next request.",
                             "A new token can be created at any time, but it is a different token: each script "
                             "must be given it again."],
            "action": request.path, "button": "Revoke the token", "back": reverse("account")})
    if not api_token_revoke(user=request.user, token_id=token_id):
        messages.error(request, "No such token (already revoked?).")
        return redirect("account")
    messages.success(request, "Token revoked. Scripts using it are now refused.")
    return redirect("account")
