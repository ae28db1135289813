"""Static files storage: whitenoise's compressed manifest storage, not strict about the manifest.

``collectstatic`` writes gzip copies and content-hashed names (cached for ever; Plotly's 4.8 MB goes out
as about 1.4 MB). Without ``collectstatic`` (the tests, ``python3 dev.py run``) there is no manifest and
names stay as they are instead of failing.
"""

from whitenoise.storage import CompressedManifestStaticFilesStorage


class CompressedManifestStorage(CompressedManifestStaticFilesStorage):
    manifest_strict = False
