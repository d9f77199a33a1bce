"""Django middleware answering 400 with the text for a pattern the store refused.

`/metrics/find` and `/render` already turn `InputParameterError` into 400; views that
do not (`/metrics/expand`) would answer graphite's 500 page. `graphite_plugin.settings`
adds this middleware to graphite-web's MIDDLEWARE.
"""
from __future__ import annotations

from django.http import HttpResponseBadRequest

from graphite_plugin.errors import PatternRefused


class PatternRefusedMiddleware:
    """Answer 400 (text/plain, the error's message) for PatternRefused raised by a view."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if isinstance(exception, PatternRefused):
            return HttpResponseBadRequest(str(exception), content_type="text/plain; charset=utf-8")
        return None
