"""`dsx serve`: the REST API for automation (CI pipelines, portals)."""

from __future__ import annotations

import click

from dsx import settings
from dsx.cli.params import FiniteFloatRange, log_format_option


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=settings.API_PORT, show_default=True, type=click.IntRange(1, 65535))
@click.option("--token-file", default=None, metavar="FILE", help="Bearer tokens, one a line (also $DSX_API_TOKENS).")
@click.option(
    "--store", "store_url", default=None, metavar="URL", help="Sentinel event store (sqlite:///… or postgresql://…)."
)
@click.option("--max-body-bytes", default=settings.API_MAX_BODY_BYTES, show_default=True, type=click.IntRange(1024))
@click.option(
    "--rate",
    "rate_per_second",
    default=settings.API_RATE_PER_SECOND,
    show_default=True,
    type=FiniteFloatRange(0.1, 1_000_000),
    help="Sustained requests per second per token.",
)
@click.option("--print-openapi", is_flag=True, help="Print the OpenAPI document and exit.")
@log_format_option
def serve(
    host: str,
    port: int,
    token_file: str | None,
    store_url: str | None,
    max_body_bytes: int,
    rate_per_second: float,
    print_openapi: bool,
    log_format: str,
) -> None:
    """Serve the REST API: Swagger UI at /docs, the OpenAPI document at /openapi.json.

    Every other endpoint except /healthz and /readyz needs a bearer token.

    The server (shared with `dsx sentinel run`) closes a connection whose headers take over
    10 s, whose body or response takes over 30 s, or that idles 30 s between requests, and
    serves at most 128 connections at once: one more takes the slot of the connection waiting
    longest for its request, and is answered 503 only when all 128 are serving requests.
    """
    import json
    import logging

    from dsx import logs
    from dsx.api import app as api_app
    from dsx.api import security
    from dsx.errors import BadInputError

    logs.configure(log_format)  # before the app: a route module's missing-extra warning is a log line too
    tokens = security.load_tokens(token_file)
    settings = api_app.ApiSettings(
        token_digests=tokens,
        max_body_bytes=max_body_bytes,
        rate_per_second=rate_per_second,
        burst=max(1, int(rate_per_second * 2)),
        store_url=store_url,
    )
    application = api_app.create_app(settings)
    if print_openapi:
        click.echo(json.dumps(application.openapi(), indent=2, sort_keys=True))
        return
    if not tokens:
        raise BadInputError("no API tokens: pass --token-file FILE or set DSX_API_TOKENS")
    from dsx.api import server

    url = f"http://{host}:{port}"
    logging.getLogger("dsx.api").info("serving on %s (docs at %s/docs)", url, url, extra={"url": url})
    server.serve_asgi(
        application,
        security.TokenAuthenticator(tokens),
        host=host,
        port=port,
        limits=server.ServerLimits(max_body_bytes=max_body_bytes),
    )
