"""`/render?format=json` answered with graphite_plugin.render_json's encoder.

graphite_plugin.middleware.ViewShortcutMiddleware (in MIDDLEWARE through
graphite_plugin.settings) uses Django's `process_view` hook: when URL routing picked
graphite-web's `renderView`, it asks `render_json` first, which follows renderView's
steps for a line graph in JSON with graphite's own functions (parseOptions, hashRequest and hashData with Django's
cache, evaluateTarget, the cache headers, handleInputParameterError for a 400) and only
encodes the series differently, to the same bytes; a wide render of one plain pattern or
its sumSeries is evaluated on the store's arrays (graphite_plugin.render_fast). Every other request (another format
or graph type, `pretty=1`, options graphite cannot parse: graphite answers its own
error) goes to graphite's view. graphite-web's files and modules are left as they are.
"""
from __future__ import annotations

from time import time

from django.core.cache import cache, caches
from django.core.cache.backends.dummy import DummyCache
from django.http import HttpResponse
from django.utils.cache import add_never_cache_headers, patch_response_headers
from graphite.errors import handleInputParameterError
from graphite.logger import log
from graphite.render.evaluator import evaluateTarget
from graphite.render.hashing import hashData, hashRequest
from graphite.render.views import parseOptions

from graphite_plugin.reader import FETCHED_ARRAYS
from graphite_plugin.render_fast import wide_render
from graphite_plugin.render_json import encode


def handles(options: dict) -> bool:
    """Whether render_json answers a request with these options exactly as renderView would."""
    return options.get("format") == "json" and options["graphType"] == "line" and not options.get("pretty")


def request_context(options: dict) -> dict:
    """renderView's requestContext for parsed request options, with a dict the finder fills
    with the arrays it read (graphite_plugin.reader.FETCHED_ARRAYS; shared by the
    context's copies that graphite functions make)."""
    return {
        "startTime": options["startTime"],
        "endTime": options["endTime"],
        "now": options["now"],
        "localOnly": options["localOnly"],
        "template": options["template"],
        "tzinfo": options["tzinfo"],
        "forwardHeaders": options["forwardHeaders"],
        "sourceIdHeaders": options["sourceIdHeaders"],
        "data": [],
        "prefetched": {},
        "xFilesFactor": options["xFilesFactor"],
        "maxDataPoints": options.get("maxDataPoints", None),
        "targets": options["targets"],
        "maxStep": options.get("maxStep", None),
        FETCHED_ARRAYS: {},
    }


@handleInputParameterError
def render_json(request) -> HttpResponse | None:
    """renderView's answer to a JSON line render, or None for graphite's view to answer."""
    start = time()
    try:
        _, options = parseOptions(request)
    except Exception:  # graphite's view answers (400 with its message)
        return None
    if not handles(options):
        return None
    use_cache = "noCache" not in options
    cache_timeout = options["cacheTimeout"]
    context = request_context(options)
    data = context["data"]
    if use_cache:
        request_key = hashRequest(request)
        response = cache.get(request_key)
        if response:
            log.cache("Request-Cache hit [%s]" % request_key)
            log.rendering("Returned cached response in %.6f" % (time() - start))
            return response
        log.cache("Request-Cache miss [%s]" % request_key)
    cached_data = None
    if use_cache:
        data_key = hashData(options["targets"], options["startTime"], options["endTime"], options["xFilesFactor"])
        cached_data = cache.get(data_key)
        log.cache(("Data-Cache hit [%s]" if cached_data else "Data-Cache miss [%s]") % data_key)
    if cached_data is not None:
        context["data"] = data = cached_data
    else:
        # raw series as arrays only where no data cache hands them to graphite's other views
        fast = wide_render(context, options["targets"], not use_cache or isinstance(caches["default"], DummyCache))
        data.extend(evaluateTarget(context, options["targets"]) if fast is None else fast)
        if use_cache:
            cache.add(data_key, data, cache_timeout)
    render_start = time()
    output = encode(data, options, context[FETCHED_ARRAYS])
    if "jsonp" in options:
        response = HttpResponse(content="%s(%s)" % (options["jsonp"], output), content_type="text/javascript")
    else:
        response = HttpResponse(content=output, content_type="application/json")
    if use_cache:
        cache.add(request_key, response, cache_timeout)
        patch_response_headers(response, cache_timeout=cache_timeout)
    else:
        add_never_cache_headers(response)
    log.rendering("json rendering time %6f" % (time() - render_start))
    log.rendering("Total request processing time %6f" % (time() - start))
    return response
