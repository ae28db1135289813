"""Test-run environment: production-like settings (DEBUG off) with a test secret and plain HTTP."""

import os

os.environ.setdefault("SECRET_KEY", "test-secret-key-not-for-production-0123456789abcdefghijklmnop")
os.environ.setdefault("SECURE_SSL_REDIRECT", "false")
os.environ.setdefault("ALLOWED_HOSTS", "testserver,127.0.0.1,localhost")
# The suite never reads a developer's local.env (written by dev.py run): its settings are its own.
os.environ["KVP_ENV_FILE"] = ""
