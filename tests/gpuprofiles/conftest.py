import pytest

from .factories import make_user


@pytest.fixture
def user(db):
    return make_user("alice")


@pytest.fixture
def other_user(db):
    return make_user("bob")
