"""A real ``EnvServer`` on a free loopback port, serving the env tests' synthetic dataset."""

from __future__ import annotations

import threading

import pytest

from paravt_env.remote.server import EnvServer, EnvServerLimits


def start_server(samples, **limits) -> EnvServer:
    server = EnvServer(("127.0.0.1", 0), list(samples), EnvServerLimits(**limits))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def env_server(env_samples):
    server = start_server(env_samples)
    yield server
    server.shutdown()
    server.server_close()
