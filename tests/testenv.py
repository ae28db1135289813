"""Test-run environment: production-like settings (DEBUG off) with a test secret and plain HTTP."""

import os

os.environ.setdefault("SECRET_KEY", "test-secret-key-not-for-production-0123456789abcdefghijklmnop")
os.environ.setdefault("SECURE_SSL_REDIRECT", "false")
os.environ.setdefault("ALLOWED_HOSTS", "testserver,127.0.0.1,localhost")

# Rate limits count in a cache shared by processes: give each test run its own (never the dev server's
# var/cache), and limits no ordinary test reaches; the throttling tests set their own with override_settings.
# Set in every test process, not inherited: xdist's workers start with the controller's environment, and two
# workers sharing one cache would reset each other's counters.
if os.environ.get("KVP_CACHE_OWNER_PID") != str(os.getpid()):
    os.environ["KVP_CACHE_OWNER_PID"] = str(os.getpid())
    os.environ["KVP_CACHE_DIR"] = __import__("tempfile").mkdtemp(prefix="kvp-test-cache-")
    os.environ["KVP_CACHE_KEY_PREFIX"] = f"kvp-test-{os.getpid()}-{__import__('uuid').uuid4().hex[:8]}"
for _name in ("THROTTLE_PAGES", "THROTTLE_HEAVY_PAGES", "THROTTLE_HEAVY"):
    os.environ.setdefault(_name, "100000/min")
os.environ.setdefault("LOGIN_FAILURES", "100000/h")
os.environ.setdefault("LOGIN_FAILURES_PER_IP", "100000/h")
os.environ.setdefault("THROTTLE_SIGNUPS", "100000/h")
# The suite never reads a developer's local.env (written by dev.py run): its settings are its own.
os.environ["KVP_ENV_FILE"] = ""
