"""WSGI calls for the tests of the fronts in front of Django (graphite_plugin.wsgi,
graphite_plugin.tags_front): a request's environ and the (status, headers, body) of one
call of an application on it."""
from __future__ import annotations


def environ(method: str = "GET", params: dict | None = None, path: str = "/metrics/find", **extra) -> dict:
    """The WSGI environ of a request (Django's RequestFactory), its body kept aside."""
    from django.test import RequestFactory

    factory = RequestFactory()
    request = (factory.get if method == "GET" else factory.post)(path, params or {}, **extra)
    env = dict(request.environ)
    env["_body"] = env["wsgi.input"].read(int(env.get("CONTENT_LENGTH") or 0))
    return env


def call(app, env: dict) -> tuple:
    """(status, headers, body) of one WSGI call (on a copy with its own body stream: a body is read once)."""
    from django.test.client import FakePayload

    started = []
    env = dict(env, **{"wsgi.input": FakePayload(env["_body"])})
    body = b"".join(app(env, lambda s, h, *a: started.append((s, h))))
    [(status, headers)] = started
    return status, headers, body
