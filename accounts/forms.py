"""Forms for the account pages."""

from __future__ import annotations

from django import forms
from django.contrib.auth.forms import UserCreationForm


class SignUpForm(UserCreationForm):
    """Username and password (twice); e-mail optional."""

    email = forms.EmailField(required=False, help_text="Optional; only used to reset a forgotten password.")

    class Meta(UserCreationForm.Meta):
        fields = ("username", "email")


class TokenCreateForm(forms.Form):
    name = forms.CharField(
        max_length=100,
        label="Token name",
        help_text="What the token is for, e.g. 'capacity notebook' or 'CI'.",
        widget=forms.TextInput(attrs={"autocomplete": "off"}),
    )
