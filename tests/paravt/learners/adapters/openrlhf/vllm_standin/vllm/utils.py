"""``vllm.utils``: the request id ``RolloutRayActor.generate`` gives each request."""

import uuid


def random_uuid() -> str:
    return uuid.uuid4().hex
