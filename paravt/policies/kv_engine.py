"""The local rollout engine: a multi-turn generator that keeps what it has computed.

``model.generate`` re-reads a whole conversation at every turn, prefills a batch left-padded to its longest row
(the padding mask takes attention off its fast path), grows its cache by concatenation at every step and decodes
until the longest row of the batch ends. Measured on ``tiny_cpu`` , turns 2-4 took 88 % of generation
time for 39 % of the tokens. This engine instead:

* keeps each episode's KV cache between turns (``sessions``: a key per episode): a new turn prefills only the
  tokens and images added since the episode's last turn; a prompt that does not extend what is cached (another
  conversation under the same key, an evicted session) is prefilled whole, so a session is an optimisation and
  never changes what is computed;
* prefills one row at a time, without padding, and a prompt several rows of one call share (a GRPO group's first
  turn) once: the rows start from one cache and each gets a cache of its own as it decodes;
* decodes every row of a batch together in a preallocated cache (``_GrowingLayer``: appending writes in place),
  and a row that ends leaves the batch at once;
* encodes each distinct image once per step through the vision tower (``paravt.policies.vision_cache``).

Positions are Qwen-VL's multimodal RoPE: a chunk's positions are the model's own ``get_rope_index`` of the
chunk, offset by where the cached prefix ended (every position of a chunk, text or image, is relative to its
start, so the offset is exact). Sampling is ``generate``'s: image pads and ids past the tokenizer suppressed,
temperature then top-p (the library's warpers), ``multinomial`` on torch's global generator (so the trainer's
saved RNG states keep resume bit-exact), and each sampled token's log-probability under that distribution, which
is what GRPO's importance ratio divides by. ``tests/paravt/policies/test_kv_engine.py`` checks the greedy tokens
against ``model.generate`` and the recorded log-probs against a fresh forward of the finished sequence.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import TopPLogitsWarper
from transformers.cache_utils import Cache, DynamicLayer

from paravt.policies.encoded import Encoded, length_buckets
from paravt.policies.vision_cache import VisionCache

MAX_SESSIONS = 256
"""Episodes whose caches are kept at once (least recently used dropped first: a dropped episode's next turn is
prefilled whole, nothing else changes). A step of the release recipe plays 64 episodes at most."""


class _GrowingLayer(DynamicLayer):
    """A cache layer whose keys and values live in a buffer with room to grow: appending a step writes in place
    (``DynamicLayer`` concatenates the whole cache again at every decoding step)."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, capacity: int) -> None:
        super().__init__()
        b, h, n, d = keys.shape
        self._k = keys.new_zeros((b, h, max(capacity, n), d))
        self._v = values.new_zeros((b, h, max(capacity, n), values.shape[-1]))
        self._k[:, :, :n] = keys
        self._v[:, :, :n] = values
        self._n = n
        self.dtype, self.device, self.is_initialized = keys.dtype, keys.device, True
        self._views()

    def _views(self) -> None:
        self.keys, self.values = self._k[:, :, : self._n], self._v[:, :, : self._n]

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:  # never lazy
        raise AssertionError("a _GrowingLayer is built with its contents")

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any):
        n = key_states.shape[-2]
        if self._n + n > self._k.shape[-2]:  # out of room (a caller's cap was exceeded): double it
            grow = max(self._n + n, 2 * self._k.shape[-2]) - self._k.shape[-2]
            self._k = torch.cat([self._k, self._k.new_zeros((*self._k.shape[:2], grow, self._k.shape[-1]))], dim=2)
            self._v = torch.cat([self._v, self._v.new_zeros((*self._v.shape[:2], grow, self._v.shape[-1]))], dim=2)
        self._k[:, :, self._n : self._n + n] = key_states
        self._v[:, :, self._n : self._n + n] = value_states
        self._n += n
        self._views()
        return self.keys, self.values

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        self._k, self._v = self._k[indices], self._v[indices]
        self._views()


def chunk_positions(model: Any, chunk: torch.Tensor, types: torch.Tensor, grid: torch.Tensor | None) -> torch.Tensor:
    """(3, 1, n) multimodal RoPE positions of a chunk of ids (1, n) that starts at position 0, with the grids of the
    images it holds: the model's own ``get_rope_index``. Every position in a chunk is relative to its start, so a
    chunk that follows a prefix takes these plus the prefix's largest position + 1."""
    if grid is None:
        return torch.arange(chunk.shape[1]).view(1, 1, -1).expand(3, 1, -1)
    positions, _ = model.model.get_rope_index(input_ids=chunk, mm_token_type_ids=types, image_grid_thw=grid)
    return positions.cpu()


@dataclass
class Session:
    """One episode's cache: the ids it holds (the conversation so far, the last sampled token excepted: it was
    never fed), each layer's keys and values (1, heads, len(ids), dim), every token's RoPE position (3, len(ids))
    and the identity of each image the ids hold (``VisionCache.image_keys``)."""

    ids: list[int]
    layers: list[tuple[torch.Tensor, torch.Tensor]]
    positions: torch.Tensor
    image_keys: list

    @property
    def next_pos(self) -> int:
        return int(self.positions.max()) + 1 if self.positions.shape[1] else 0


@dataclass
class _Row:
    key: Hashable | None
    session: Session
    logits: torch.Tensor  # (V,) fp32: the next token's, after the prefill
    tokens: list[int]
    logprobs: list[float]


class CachedGenerator:
    """Generates for an ``HFPolicy`` (its model, end and suppressed ids, token types; typed ``Any`` here: the policy
    module imports this one); see the module doc."""

    def __init__(self, policy: Any, max_sessions: int = MAX_SESSIONS) -> None:
        self.policy = policy
        self.max_sessions = int(max_sessions)
        self.sessions: OrderedDict[Hashable, Session] = OrderedDict()
        self.stats = {"prefill_tokens": 0, "reused_tokens": 0, "shared_tokens": 0, "generated_tokens": 0,
                      "prefill_s": 0.0, "decode_s": 0.0, "decode_steps": 0, "decoded_tokens": 0}  # fmt: skip
        """Running totals (what a benchmark reads): tokens prefilled, cached tokens a turn did not prefill again,
        tokens of a prompt that another row of the same call had just prefilled, tokens generated, and the seconds
        spent prefilling and decoding; ``decode_steps`` and ``decoded_tokens`` count as they go (a watcher reads a
        decode in progress: ``benchmarks.gpu.gpu_step``), the others when a call ends."""
        self.vision = VisionCache(policy.model)

    # --- sessions -------------------------------------------------------------------------------------------
    def end(self, keys: Sequence[Hashable]) -> None:
        """Forget these episodes' caches (their episodes ended)."""
        for k in keys:
            self.sessions.pop(k, None)

    def reset(self) -> None:
        """Forget every cache and every image feature (the weights are about to change, or a step begins)."""
        self.sessions.clear()
        self.vision.clear()

    # --- generation -----------------------------------------------------------------------------------------
    def generate(
        self, pairs: Iterable[tuple[Encoded, Hashable | None]], *, temperature: float, top_p: float,
        max_new_tokens: int, batch_tokens: int | None,
    ) -> list[tuple[list[int], list[float], bool]]:
        """Per (prompt, session key) pair: the generated ids, their log-probs, and whether it stopped on an end
        token. ``pairs`` may be an iterator that yields as each prompt becomes ready (``HFPolicy``'s gathered
        turns and ``generate_as_ready``): each prompt is prefilled as it arrives, alone, so what is computed does
        not depend on when it arrives; the batch decodes after the last."""
        t0 = time.perf_counter()
        rows: list[_Row] = []
        same: dict[tuple, _Row] = {}  # a GRPO group's rollouts share their first prompt: prefilled once
        for prompt, key in pairs:
            images = self.vision.image_keys(prompt) if prompt.n_images else []
            identity = (tuple(prompt.input_ids), tuple(images))
            twin = same.get(identity)
            if twin is not None and (key is None or key not in self.sessions):
                s = twin.session  # read-only until its decode hands each row a cache of its own
                rows.append(_Row(key, Session(list(s.ids), s.layers, s.positions, list(s.image_keys)), twin.logits, [], []))
                self.stats["shared_tokens"] += len(s.ids)
                continue
            rows.append(self._prefill(prompt, key, images))
            same.setdefault(identity, rows[-1])
        t1 = time.perf_counter()
        lengths = [len(r.session.ids) for r in rows]
        for bucket in length_buckets(lengths, max_tokens=batch_tokens):
            self._decode([rows[i] for i in bucket], temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens)
        self.stats["prefill_s"] += t1 - t0
        self.stats["decode_s"] += time.perf_counter() - t1
        out = []
        for r in rows:
            stopped = bool(r.tokens) and r.tokens[-1] in self.policy.eos_ids
            out.append((r.tokens, r.logprobs, stopped))
            self.stats["generated_tokens"] += len(r.tokens)
        return out

    def _prefill(self, prompt: Encoded, key: Hashable | None, images: list) -> _Row:
        ids = prompt.input_ids
        cached = self.sessions.pop(key, None) if key is not None else None
        start = self._reusable(cached, ids, images, prompt) if cached is not None else 0
        layers = [DynamicLayer() for _ in range(self._n_layers())]
        if start:
            for layer, (k, v) in zip(layers, cached.layers, strict=True):
                layer.update(k[:, :, :start], v[:, :, :start])
        n_images = sum(1 for _ in self._images_before(prompt, start))
        offset = int(cached.positions[:, :start].max()) + 1 if start else 0
        cache = Cache(layers=layers)
        chunk = torch.tensor([ids[start:]], dtype=torch.long)
        policy = self.policy
        device = policy.device
        types = policy._token_types(chunk)
        grid = prompt.image_grid_thw[n_images:] if prompt.n_images > n_images else None
        positions = self._positions(chunk, types, grid) + offset
        inputs: dict[str, Any] = {"input_ids": chunk.to(device), "position_ids": positions.to(device)}
        if grid is not None and self.vision.supported:
            inputs["mm_encoder_outputs"] = {"image": self.vision.features(prompt, n_images, images)}
        elif grid is not None:  # a transformers without precomputed features: the chunk's own images, encoded now
            rows = int(prompt.image_grid_thw[:n_images].prod(-1).sum()) if n_images else 0
            inputs["pixel_values"] = prompt.pixel_values[rows:].to(device, policy.model.dtype)
            inputs["image_grid_thw"] = grid.to(device)
        out = policy.model(**inputs, past_key_values=cache, use_cache=True, logits_to_keep=1)
        self.stats["prefill_tokens"] += chunk.shape[1]
        self.stats["reused_tokens"] += start
        kept = cached.positions[:, :start] if start else positions.new_zeros((3, 0))
        session = Session(list(ids), [(layer.keys, layer.values) for layer in cache.layers],
                          torch.cat([kept, positions[:, 0]], dim=1), images)  # fmt: skip
        return _Row(key, session, out.logits[0, -1].float(), [], [])

    def _reusable(self, cached: Session, ids: list[int], images: list, prompt: Encoded) -> int:
        """How many leading tokens of ``ids`` the cached session holds: their common prefix, cut before the first
        image whose pixels differ, and short of the whole prompt (the last token is fed to get the next logits)."""
        n = min(len(cached.ids), len(ids) - 1)
        p = 0
        while p < n and cached.ids[p] == ids[p]:
            p += 1
        for i, (begin, end) in enumerate(self._images_before(prompt, p)):
            if end > p or i >= len(cached.image_keys) or cached.image_keys[i] != images[i]:
                return begin
        return p

    def _images_before(self, prompt: Encoded, stop: int):
        """(start, end) token spans of the images that begin before ``stop``; an image that ``stop`` cuts counts
        (the caller cuts before it)."""
        if not prompt.n_images or stop <= 0:
            return
        pad = self.policy.image_pad_id
        ids = prompt.input_ids
        i = 0
        while i < stop:
            if ids[i] == pad:
                j = i
                while j < len(ids) and ids[j] == pad:
                    j += 1
                yield i, j
                i = j
            else:
                i += 1

    def _positions(self, chunk: torch.Tensor, types: torch.Tensor, grid: torch.Tensor | None) -> torch.Tensor:
        return chunk_positions(self.policy.model, chunk, types, grid)

    def _n_layers(self) -> int:
        return int(self.policy.model.config.get_text_config().num_hidden_layers)

    def _decode(self, rows: list[_Row], *, temperature: float, top_p: float, max_new_tokens: int) -> None:
        """Sample every row's continuation together: rows right-aligned in one growing cache (left padding masked),
        each leaving the batch as it ends; each row's cache is handed back to its session."""
        policy, device = self.policy, self.policy.device
        lengths = [len(r.session.ids) for r in rows]
        width = max(lengths)
        capacity = width + max_new_tokens
        layers = []
        for li in range(len(rows[0].session.layers)):
            k0, v0 = rows[0].session.layers[li]
            keys = k0.new_zeros((len(rows), k0.shape[1], width, k0.shape[-1]))
            values = v0.new_zeros((len(rows), v0.shape[1], width, v0.shape[-1]))
            for b, r in enumerate(rows):
                k, v = r.session.layers[li]
                keys[b, :, width - k.shape[2] :] = k[0]
                values[b, :, width - v.shape[2] :] = v[0]
            layers.append(_GrowingLayer(keys, values, capacity))
        for r in rows:
            r.session.layers = []  # the batch holds them now
        cache = Cache(layers=layers)
        mask = torch.zeros((len(rows), capacity), dtype=torch.long, device=device)
        for b, n in enumerate(lengths):
            mask[b, width - n : width] = 1
        next_pos = torch.tensor([r.session.next_pos for r in rows], dtype=torch.long)
        logits = torch.stack([r.logits for r in rows])
        live = list(range(len(rows)))  # batch position -> row index
        step = 0
        while True:
            tokens, logprobs = self._pick(logits, temperature, top_p)
            self.stats["decode_steps"] += 1
            self.stats["decoded_tokens"] += len(live)
            keep = []
            for b, i in enumerate(live):
                row, token = rows[i], int(tokens[b])
                row.tokens.append(token)
                row.logprobs.append(float(logprobs[b]))
                if token in policy.eos_ids or len(row.tokens) >= max_new_tokens:
                    self._finish(row, cache, b, width - lengths[i], width + step)
                else:
                    keep.append(b)
            if not keep:
                return
            if len(keep) < len(live):  # finished rows leave the batch
                index = torch.tensor(keep, dtype=torch.long, device=device)
                for layer in cache.layers:
                    layer.batch_select_indices(index)
                mask, tokens = mask[index], tokens[index.cpu()]
                next_pos = next_pos[index.cpu()]
                live = [live[b] for b in keep]
            mask[:, width + step] = 1
            positions = (next_pos + step).view(1, -1, 1).expand(3, -1, 1)
            out = policy.model(input_ids=tokens.view(-1, 1).to(device), position_ids=positions.to(device),
                               attention_mask=mask[:, : width + step + 1], past_key_values=cache, use_cache=True,
                               logits_to_keep=1)  # fmt: skip
            logits = out.logits[:, -1].float()
            step += 1

    def _finish(self, row: _Row, cache: Cache, b: int, start: int, stop: int) -> None:
        """Hand row ``b``'s cache (columns ``start:stop``: its prompt and every generated token but the last,
        which was never fed) back to its session, and keep the session under its key."""
        s = row.session
        s.layers = [(layer.keys[b : b + 1, :, start:stop].clone(), layer.values[b : b + 1, :, start:stop].clone())
                    for layer in cache.layers]  # fmt: skip
        fed = row.tokens[:-1]
        first = s.next_pos  # generated tokens take text positions, one after another, from the prompt's next
        s.ids = s.ids + fed
        s.positions = torch.cat([s.positions, torch.arange(first, first + len(fed)).view(1, -1).expand(3, -1)], dim=1)
        if row.key is not None:
            self.sessions[row.key] = s
            self.sessions.move_to_end(row.key)
            while len(self.sessions) > self.max_sessions:
                self.sessions.popitem(last=False)

    def _pick(self, logits: torch.Tensor, temperature: float, top_p: float) -> tuple[torch.Tensor, torch.Tensor]:
        """``generate``'s choice: suppressed ids masked, then temperature and top-p (when sampling), then a
        multinomial draw or the argmax; and the chosen token's log-prob under that distribution."""
        scores = self._suppressed(logits)
        if temperature > 0:
            if temperature != 1.0:
                scores = scores / temperature
            if top_p < 1.0:
                scores = TopPLogitsWarper(top_p=top_p)(None, scores)
            tokens = torch.multinomial(torch.softmax(scores, dim=-1), num_samples=1).squeeze(1)
        else:
            tokens = scores.argmax(dim=-1)
        logprobs = torch.log_softmax(scores, dim=-1).gather(-1, tokens[:, None]).squeeze(1)
        return tokens.cpu(), logprobs.cpu()

    def _suppressed(self, logits: torch.Tensor) -> torch.Tensor:
        """A copy of ``logits`` with the policy's suppressed ids at -inf (its mask, built once per vocabulary)."""
        scores = logits.clone()
        banned = self.policy.suppress_mask(scores.shape[-1], scores.device)
        if banned is not None:
            scores.masked_fill_(banned, float("-inf"))
        return scores
