"""Account pages: sign up, API tokens."""

urlpatterns: list = []
