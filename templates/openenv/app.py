"""HTTP and WebSocket server for the {{env_id}} environment.

Run it with `uv run server` (or `uv run --project . server`), `python -m {{package}}.server.app`,
or `uvicorn server.app:app` from this directory. By hand it listens on 127.0.0.1
only; pass `--host 0.0.0.0` to serve other machines (the Dockerfile does).
"""

import os

from openenv.core.env_server.http_server import create_app

try:
    from ..models import {{action_class}}, {{observation_class}}
    from .{{environment_module}} import {{environment_class}}
except ImportError:
    from models import {{action_class}}, {{observation_class}}
    from server.{{environment_module}} import {{environment_class}}

app = create_app(
    {{environment_class}},
    {{action_class}},
    {{observation_class}},
    env_name={{env_id_literal}},
    max_concurrent_envs=int(os.environ.get("MAX_CONCURRENT_ENVS", "64")),
)


def main(argv: list[str] | None = None) -> None:
    """The `server` script: `--host` (default 127.0.0.1) and `--port` (default 8000)."""
    import argparse

    import uvicorn

    parser = argparse.ArgumentParser(description="Serve the {{env_id}} environment.")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    args = parser.parse_args(argv)
    uvicorn.run(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
