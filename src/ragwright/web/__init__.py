"""The page for the people who ask: ``ragwright serve`` serves it at ``/``.

Server-rendered Jinja2 templates and one small hand-written JavaScript module that reads
the same answer stream as ``POST /v1/answers/stream`` (docs/web.md says why). The page
signs in with an API key into a server-side session and applies the key's grant through
the service's own request builders and admission: it adds no authorisation of its own.
"""
