"""graphite-web's URLs with graphite_plugin.error_views answering errors (ROOT_URLCONF,
set by graphite_plugin.settings)."""
from graphite.urls import urlpatterns  # noqa: F401 - Django reads it from this module

handler400 = "graphite_plugin.error_views.bad_request"
handler403 = "graphite_plugin.error_views.permission_denied"
handler404 = "graphite_plugin.error_views.page_not_found"
handler500 = "graphite_plugin.error_views.server_error"
