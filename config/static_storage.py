"""Static files storage: whitenoise's compressed manifest storage, not strict about the manifest.

``collectstatic`` writes gzip copies and content-hashed names (cached for ever; Plotly's 1.4 MB bundle goes out
as about 0.48 MB). Without ``collectstatic`` (the tests, ``python3 dev.py run``) there is no manifest and
no collected file to hash: names then stay as they are, served by whitenoise's finders.
"""

from whitenoise.storage import CompressedManifestStaticFilesStorage


class CompressedManifestStorage(CompressedManifestStaticFilesStorage):
    manifest_strict = False

    def stored_name(self, name: str) -> str:
        try:
            return super().stored_name(name)
        except ValueError:  # not collected: the plain name (whitenoise finds it in the app's static folders)
            return name
