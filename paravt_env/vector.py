"""``GroupedEnv``: G rollouts of one prompt, side by side, for learners that sample GRPO groups.

All G copies reset to the same sample and epoch, so they share the frame budget K (gating hashes the sample,
epoch and env seed, never the copy) and the decoded overview (the process-wide overview cache decodes it
once). ``step`` advances the copies still running concurrently, so their crops overlap too.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .config import EnvConfig
from .env import VideoToolEnv, _as_samples


class GroupedEnv:
    """A group of ``group_size`` ``VideoToolEnv`` copies that always play the same prompt.

    ``step`` takes one action per copy; copies that have finished take ``None`` and return ``None``
    observations until the next ``reset``.
    """

    def __init__(
        self,
        samples: Any,
        group_size: int = 8,
        config: EnvConfig | None = None,
        *,
        video_root: str | None = None,
        **options: Any,
    ) -> None:
        if group_size < 1:
            raise ValueError(f"group_size must be >= 1, got {group_size}")
        self.config = config if config is not None else EnvConfig.from_kwargs(**options)
        samples = _as_samples(samples, video_root)
        self.envs = [VideoToolEnv(samples, self.config) for _ in range(group_size)]
        self.done = [True] * group_size
        self._pool = ThreadPoolExecutor(max_workers=group_size, thread_name_prefix="group")

    @property
    def group_size(self) -> int:
        return len(self.envs)

    @property
    def samples(self):
        return self.envs[0].samples

    def reset(
        self,
        *,
        index: int | None = None,
        sample: Any = None,
        epoch: int = 0,
        frame_budget: int | None = None,
        seed: int | None = None,
    ) -> tuple[list[dict], list[dict]]:
        """Reset every copy to one prompt. Without ``index``/``sample`` the first copy picks (seeded by
        ``seed``) and the others follow it."""
        options: dict[str, Any] = {"epoch": epoch}
        if frame_budget is not None:
            options["frame_budget"] = frame_budget
        if sample is not None:
            options["sample"] = sample
        elif index is not None:
            options["index"] = index
        first_obs, first_info = self.envs[0].reset(seed=seed, options=options)
        options.pop("index", None)
        options["sample"] = self.envs[0].sample
        rest = list(self._pool.map(lambda env: env.reset(seed=seed, options=options), self.envs[1:]))
        self.done = [False] * self.group_size
        return [first_obs, *(o for o, _ in rest)], [first_info, *(i for _, i in rest)]

    def step(self, actions: Sequence[str | None]) -> tuple[list, list[float], list[bool], list[bool], list[dict]]:
        if len(actions) != self.group_size:
            raise ValueError(f"step needs {self.group_size} actions (one per copy), got {len(actions)}")

        def one(i: int):
            if self.done[i]:
                return None, 0.0, False, False, {}
            return self.envs[i].step(actions[i])

        results = list(self._pool.map(one, range(self.group_size)))
        for i, (_, _, term, trunc, _) in enumerate(results):
            if term or trunc:
                self.done[i] = True
        obs, rewards, terms, truncs, infos = (list(x) for x in zip(*results, strict=True))
        return obs, rewards, terms, truncs, infos

    @property
    def all_done(self) -> bool:
        return all(self.done)

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        for env in self.envs:
            env.close()
