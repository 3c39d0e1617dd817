"""``render()``: an RGB contact sheet of the frames an agent has seen, each captioned with its time.

Drawn with numpy and a 3x5 bitmap font for the caption characters, so the env layer needs no imaging
library.
"""

from __future__ import annotations

import numpy as np

# 3x5 glyphs, rows top to bottom, 3 bits each (MSB = left column).
_GLYPHS = {
    "0": (7, 5, 5, 5, 7), "1": (2, 6, 2, 2, 7), "2": (7, 1, 7, 4, 7), "3": (7, 1, 7, 1, 7),
    "4": (5, 5, 7, 1, 1), "5": (7, 4, 7, 1, 7), "6": (7, 4, 7, 5, 7), "7": (7, 1, 1, 1, 1),
    "8": (7, 5, 7, 5, 7), "9": (7, 5, 7, 1, 7), ".": (0, 0, 0, 0, 2), "s": (0, 3, 6, 3, 6),
    "#": (5, 7, 5, 7, 5), " ": (0, 0, 0, 0, 0),
}  # fmt: skip


def _caption(text: str, scale: int) -> np.ndarray:
    """A white-on-black mask image of ``text`` (unknown characters draw as blanks)."""
    cols = []
    for ch in text:
        rows = _GLYPHS.get(ch, _GLYPHS[" "])
        glyph = np.array([[(r >> (2 - c)) & 1 for c in range(3)] for r in rows], dtype=bool)
        cols.append(np.pad(glyph, ((0, 0), (0, 1))))
    mask = np.concatenate(cols, axis=1) if cols else np.zeros((5, 1), bool)
    return np.kron(mask, np.ones((scale, scale), dtype=bool))


def contact_sheet(
    images: list[np.ndarray], captions: list[str], columns: int = 8, tile: int = 160, pad: int = 4
) -> np.ndarray:
    """Tile images (any sizes, letterboxed into ``tile`` x ``tile``) with a caption strip under each."""
    scale = max(1, tile // 80)
    strip = 5 * scale + 2 * pad
    n = max(1, len(images))
    columns = max(1, min(columns, n))
    rows = -(-n // columns)
    cell_h, cell_w = tile + strip, tile
    sheet = np.full((rows * (cell_h + pad) + pad, columns * (cell_w + pad) + pad, 3), 24, dtype=np.uint8)
    for i, (img, cap) in enumerate(zip(images, captions, strict=True)):
        r, c = divmod(i, columns)
        y0, x0 = pad + r * (cell_h + pad), pad + c * (cell_w + pad)
        h, w = img.shape[:2]
        step = max(h / tile, w / tile, 1e-9)
        # Nearest-neighbour letterbox: cheap, and exact pixels are what a person inspecting a crop wants.
        ys = np.minimum((np.arange(int(h / step)) * step).astype(int), h - 1)
        xs = np.minimum((np.arange(int(w / step)) * step).astype(int), w - 1)
        thumb = img[ys][:, xs]
        oy, ox = (tile - thumb.shape[0]) // 2, (tile - thumb.shape[1]) // 2
        sheet[y0 + oy : y0 + oy + thumb.shape[0], x0 + ox : x0 + ox + thumb.shape[1]] = thumb
        mask = _caption(cap, scale)[:, :cell_w]
        cy = y0 + tile + pad
        sheet[cy : cy + mask.shape[0], x0 : x0 + mask.shape[1]][mask] = 255
    return sheet
