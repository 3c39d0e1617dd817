"""A real ``EnvServer`` on a free loopback port, serving the env tests' synthetic dataset."""

from __future__ import annotations

import pytest


@pytest.fixture
def env_server(env_samples, start_env_server):
    return start_env_server(env_samples)
