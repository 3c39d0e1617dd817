"""flash_attn.utils (stand-in, see the package docstring)."""
