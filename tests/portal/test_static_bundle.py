"""Chart pages load the smallest Plotly bundle that draws the portal's traces (bar,
scatter, waterfall: plotly.js's finance bundle), served compressed and cached for good."""

from pathlib import Path

from django.core.management import call_command
from django.http import HttpResponse
from django.test import RequestFactory, override_settings
from whitenoise.middleware import WhiteNoiseMiddleware

STATIC = Path(__file__).resolve().parents[2] / "static"


def test_the_bundle_is_plotly_finance():
    head = (STATIC / "vendor" / "plotly.min.js").read_bytes()[:200].decode()

    assert "plotly.js (finance - minified)" in head
    assert (STATIC / "vendor" / "plotly.min.js").stat().st_size < 1_400_000  # the full: 4.8 MB


def test_production_serves_it_brotli_compressed_under_a_hashed_name_cached_for_good(tmp_path):
    storage = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
    }
    with override_settings(
        STATIC_ROOT=tmp_path, STORAGES=storage, DEBUG=False, WHITENOISE_USE_FINDERS=False
    ):
        # The portal's own files only: compressing the admin's and the API docs' takes 25 s.
        ignore = ["admin", "rest_framework", "drf_spectacular_sidecar"]
        call_command("collectstatic", "--noinput", *(f"--ignore={i}" for i in ignore), verbosity=0)
        from django.contrib.staticfiles.storage import staticfiles_storage

        name = staticfiles_storage.stored_name("vendor/plotly.min.js")
        middleware = WhiteNoiseMiddleware(get_response=lambda request: HttpResponse(status=404))
        request = RequestFactory().get(f"/static/{name}", HTTP_ACCEPT_ENCODING="br, gzip")
        response = middleware(request)

    assert name != "vendor/plotly.min.js"  # content-hashed
    assert response.status_code == 200
    assert response["Content-Encoding"] == "br"
    assert int(response["Content-Length"]) < 400_000  # 351 KB; the full bundle: 1.13 MB
    assert (
        "immutable" in response["Cache-Control"]
        and "max-age=315360000" in response["Cache-Control"]
    )
