"""``vllm.utils.network_utils.get_ip`` (TRL's server client imports it)."""


def get_ip() -> str:
    return "127.0.0.1"
