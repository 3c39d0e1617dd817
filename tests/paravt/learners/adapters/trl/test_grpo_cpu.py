"""Real TRL GRPO steps on CPU under the ``[trl]`` extra's pins (``nox -s "engine(name='trl')"``): the tiny Qwen3-VL,
synthetic videos, crops through TRL's tool loop with the frames as images, the env's reward, weights that move;
the crop frames counted where they must arrive, the vision tower, both when TRL generates and when it computes
the loss; a too-short ``max_completion_length`` refused, and where allowed, its rolled-back responses counted.

A random model never writes a tool call, so the tests first imprint one episode on it (a turn of two parallel
crops, then an answer; 80 passes, ~15 s) as the local trainer renders it (``HFPolicy.encode``, the trajectory
builder's turns and feedback): sampled at temperature 1 under TRL it then calls the tool most of the time on the
prompt it was imprinted on, which gives GRPO groups with reward spread; that it does is the adapter's rendering
being the local trainer's.
"""

import copy
import json
from pathlib import Path

import numpy as np
import pytest
from engine_env import engine_import  # tests/engine_env.py

engine_import("trl", "trl")
torch = pytest.importorskip("torch")

from paravt.learners.adapters.trl import ParaVTEnvironment, dataset_rows, grpo_trainer  # noqa: E402
from paravt.learners.adapters.trl.recipe import load_trl_processor  # noqa: E402
from paravt.learners.trajectory import TrajectoryBuilder  # noqa: E402
from paravt.policies.base import Generation  # noqa: E402
from paravt.policies.hf import HFPolicy  # noqa: E402
from paravt_env import VideoToolEnv  # noqa: E402
from paravt_env.messages import observation_messages  # noqa: E402

# the TRL example of docs/engines.md at the tiny model's size: two parallel crops of at most 8 frames, 3 turns
ENV = {"frame_budget": 4, "max_pixels": 12544, "max_parallel": 2, "crop_max_frames": 8}
CALLS = [(5, 15), (20, 30)]


def call(**arguments) -> str:
    return "<tool_call>\n" + json.dumps({"name": "crop_video", "arguments": arguments}) + "\n</tool_call>"


TWO_CROPS = ["".join(call(start_time=a, end_time=b) for a, b in CALLS), "<answer>[6.0, 12.0]</answer>"]
BROKEN_LATER = [call(start_time=5, end_time=15), call(start_time=20), "<answer>[6.0, 12.0]</answer>"]
"""A crop, then a call without ``end_time`` (which once crashed TRL's tool loop after a turn of crops), then the answer."""


def imprint(model, processor, samples, passes: int, turns=TWO_CROPS) -> float:
    """Teach ``model`` one episode of sample 0 (``turns``: two parallel crops, then an answer) as the local trainer
    reads it: its policy's prompt, turns and feedback (``HFPolicy`` at the env's pixel budget,
    ``TrajectoryBuilder``), the loss on the turns' tokens."""
    env = VideoToolEnv(samples, **ENV)
    policy = HFPolicy(model, processor.tokenizer, processor.image_processor, min_pixels=env.config.min_pixels,
                      max_pixels=env.config.max_pixels)  # fmt: skip
    obs, info = env.reset(options={k: v for k, v in dataset_rows(1)[0].items() if k in ("index", "epoch")})
    history = observation_messages(obs, info)
    builder = TrajectoryBuilder(policy, policy.encode(history), history)
    executed = []
    for text in turns:
        ids = processor.tokenizer.encode(text + "<|im_end|>", add_special_tokens=False)
        builder.add_turn(Generation(text=text, token_ids=ids, logprobs=[0.0] * len(ids)))
        obs, _, terminated, truncated, info = env.step(text)
        executed.append(info["tool_calls"]["executed"])
        if not (terminated or truncated):
            builder.add_feedback(observation_messages(obs, info))
    assert terminated and executed == ([2, 0] if turns is TWO_CROPS else [1, 0, 0])
    inputs = policy.model_inputs(builder.encoded)
    labels = torch.tensor([builder.encoded.input_ids])
    labels[0, torch.tensor(builder.loss_mask) == 0] = -100
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3)
    for _ in range(passes):
        loss = model(**inputs, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
    return float(loss)


@pytest.fixture(scope="module")
def imprinted(tiny_qwen3, synth_small):
    """The tiny model with one two-crop episode imprinted, its processor as TRL loads it (``AutoProcessor``, the
    checkpoint's own template: ``grpo_trainer`` configures a copy), and the samples."""
    from transformers import AutoModelForImageTextToText

    torch.manual_seed(0)
    samples = synth_small[1][:4]
    processor = load_trl_processor(tiny_qwen3)
    model = AutoModelForImageTextToText.from_pretrained(tiny_qwen3)
    assert imprint(model, processor, samples, passes=80) < 0.05
    return model, processor, samples


class VisionCounter:
    """Images the vision tower receives per call, by whether gradients are on (the loss) or off (generation)."""

    def __init__(self, model):
        self.calls = []
        model.model.visual.register_forward_pre_hook(self.hook, with_kwargs=True)

    def hook(self, module, args, kwargs):
        grid = args[1] if len(args) > 1 else kwargs.get("grid_thw")
        if grid is not None:
            self.calls.append((torch.is_grad_enabled(), int(grid.shape[0])))

    def most(self, grad: bool) -> int:
        return max((n for g, n in self.calls if g == grad), default=0)


def train(imprinted, tmp_path, monkeypatch, steps=4, **kwargs):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    model, processor, samples = imprinted
    model, processor = copy.deepcopy(model), copy.deepcopy(processor)
    counter = VisionCounter(model)
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    args = dict(output_dir=str(tmp_path), max_steps=steps, per_device_train_batch_size=4, num_generations=4,
                use_cpu=True, report_to=[], logging_steps=1, learning_rate=1e-4, temperature=1.0, save_strategy="no",
                seed=0, max_completion_length=1024)  # fmt: skip
    args.update(kwargs)
    trainer = grpo_trainer(model, processor=processor, env=lambda: VideoToolEnv(samples, **ENV), n_samples=len(samples), **args)
    trainer.train()
    logs = [h for h in trainer.state.log_history if "reward" in h]
    return model, before, counter, logs


def test_grpo_steps_through_trl_and_crop_frames_reach_the_vision_tower(imprinted, tmp_path, monkeypatch):
    model, before, counter, logs = train(imprinted, tmp_path, monkeypatch)
    keys = ("reward", "reward_std", "loss", "grad_norm", "tools/call_frequency", "completions/mean_length", "step_time")
    print(json.dumps([{k: round(h[k], 4) for k in keys} for h in logs]))  # the figures of the closing note (-s)
    print("vision tower, most images in one call: generation", counter.most(grad=False), "loss", counter.most(grad=True))
    assert len(logs) == 4
    # (tools/failure_frequency counts calls TRL could not parse: the sampled tiny model writes some, longer
    # completions than 160 tokens leave it room to)
    assert sum(h["tools/call_frequency"] for h in logs) > 0
    assert all(np.isfinite(h["reward"]) and np.isfinite(h["loss"]) for h in logs)
    assert any(h["grad_norm"] > 0 for h in logs)
    assert all(h["paravt/replay_mismatch"] == 0 for h in logs)  # every reward replayed the frames the policy saw
    assert all(h["paravt/rolled_back_tool_responses"] == 0 for h in logs)
    assert any(not torch.equal(before[k], v) for k, v in model.named_parameters())
    # a call of the tower holds at most the 4 rollouts' overviews (4 frames each) unless crop frames reached it:
    # in a generation call (no gradient: TRL generating the turn after the crops) and in a loss call (gradient)
    overview_only = 4 * ENV["frame_budget"]
    assert counter.most(grad=False) > overview_only and counter.most(grad=True) > overview_only


def test_a_completion_length_that_drops_every_crop_is_refused_and_where_allowed_counted(imprinted, tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="cannot hold one turn of 2 parallel crops of 8 frames .* to 1024, or no single env setting"):
        train(imprinted, tmp_path, monkeypatch, max_completion_length=160)
    _, _, counter, logs = train(imprinted, tmp_path, monkeypatch, steps=2, max_completion_length=160,
                                allow_rolled_back_crops=True)  # fmt: skip
    assert sum(h["tools/call_frequency"] for h in logs) > 0
    assert sum(h["paravt/rolled_back_tool_responses"] for h in logs) > 0  # counted, no longer silent
    print("rolled back per completion:", [h["paravt/rolled_back_tool_responses"] for h in logs],
          "vision tower, most images in one call: generation", counter.most(grad=False), "loss", counter.most(grad=True))
    assert counter.most(grad=False) <= 4 * ENV["frame_budget"] >= counter.most(grad=True)  # rolled back: never seen


def test_the_think_prefix_opens_every_turn_and_the_reward_scores_what_follows(imprinted, tmp_path, monkeypatch):
    from paravt.learners.adapters.trl.environment import assistant_turns

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    model, processor, samples = imprinted
    processor = copy.deepcopy(processor)
    trainer = grpo_trainer(copy.deepcopy(model), processor=processor, n_samples=len(samples), output_dir=str(tmp_path),
                           env=lambda: VideoToolEnv(samples, **ENV, response_prefix="<think>\n"), max_steps=1,
                           per_device_train_batch_size=4, num_generations=4, use_cpu=True, report_to=[], save_strategy="no",
                           max_completion_length=1024, seed=0)  # fmt: skip
    rendered = processor.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False)
    assert rendered.endswith("<|im_start|>assistant\n<think>\n")
    trainer.train()
    # a completion that cropped: its later turns open with the prefix (tool-suffix tokens, outside the loss)
    env = ParaVTEnvironment(VideoToolEnv(samples, **ENV, response_prefix="<think>\n"))
    env.reset(**dataset_rows(1)[0])
    out = env._replay(["<think>\n" + t for t in assistant_turns("x</think><answer>red</answer>")])
    assert out["reward_breakdown"]["format"] > 0  # "<think>\n" + "x</think>..." is a well-formed turn


def test_a_malformed_call_after_a_turn_of_crops_is_feedback_and_training_goes_on(tiny_qwen3, synth_small, tmp_path,
                                                                                   monkeypatch):
    """A crop, then a call without ``end_time``, then the answer, imprinted: under TRL the broken call comes back as
    the env's feedback (a failed tool call in TRL's metrics), and every step trains: the run ends, weights move."""
    from transformers import AutoModelForImageTextToText

    torch.manual_seed(0)
    samples = synth_small[1][:4]
    processor = load_trl_processor(tiny_qwen3)
    model = AutoModelForImageTextToText.from_pretrained(tiny_qwen3)
    assert imprint(model, processor, samples, passes=80, turns=BROKEN_LATER) < 0.05
    model, before, _, logs = train((model, processor, samples), tmp_path, monkeypatch, steps=3)
    assert len(logs) == 3
    assert max(float(h["tools/failure_frequency"]) for h in logs) > 0  # the broken call reached TRL's tool loop
    assert any(not torch.equal(before[k], v) for k, v in model.named_parameters())


# --- TRL's vLLM path (colocate), vLLM stood in ---------------------------------------------------------------------
VLLM_STANDIN = Path(__file__).with_name("vllm_standin")
VLLM_RUN = r"""
import json, sys
import torch
from transformers import AutoModelForImageTextToText, TrainerCallback
from trl.import_utils import is_vllm_available
assert is_vllm_available(), "the stand-in is not seen as vLLM"
from vllm import weights_digest
from paravt.learners.adapters.trl import grpo_trainer
from paravt.learners.adapters.trl.recipe import load_trl_processor
from paravt_env import VideoToolEnv
from paravt_env.data import load_samples

model_dir, data, out_dir, env_json, max_new_tokens = sys.argv[1:6]
env = json.loads(env_json)
samples = load_samples(data)[:4]
digests = []

class Digest(TrainerCallback):
    def on_step_end(self, args, state, control, model=None, **kw):
        digests.append(weights_digest(model))

torch.manual_seed(0)
model = AutoModelForImageTextToText.from_pretrained(model_dir)
initial = weights_digest(model)
trainer = grpo_trainer(model_dir, env=lambda: VideoToolEnv(samples, **env), n_samples=len(samples), output_dir=out_dir,
                       use_vllm=True, vllm_mode="colocate", max_steps=2, per_device_train_batch_size=4, num_generations=4,
                       use_cpu=True, report_to=[], logging_steps=1, learning_rate=1e-3, temperature=1.0,
                       save_strategy="no", seed=0, max_completion_length=1024, max_new_tokens=int(max_new_tokens))
trainer.add_callback(Digest())
trainer.train()
logs = [h for h in trainer.state.log_history if "reward" in h]
print("RESULT " + json.dumps({"initial": initial, "after_steps": digests, "logs": logs}))
"""


def test_a_turns_cap_under_the_other_generators_name_is_refused(tiny_qwen3, synth_small, tmp_path):
    """``max_tokens`` is vLLM's name for a turn's cap, ``max_new_tokens`` transformers': given under the name the
    run's generator does not read, it is refused by name rather than left uncapped (or, under vLLM, a TypeError)."""
    samples = synth_small[1][:4]
    with pytest.raises(ValueError, match="with use_vllm=False a turn's cap is 'max_new_tokens'"):
        grpo_trainer(tiny_qwen3, env=lambda: VideoToolEnv(samples, **ENV), n_samples=len(samples), output_dir=str(tmp_path),
                     use_cpu=True, report_to=[], generation_kwargs={"max_tokens": 8})  # fmt: skip


def with_local_budget(model_dir: Path, pixels=(784, ENV["max_pixels"])) -> None:
    """The local trainer's pixel budget written into the checkpoint's ``preprocessor_config.json``."""
    path = model_dir / "preprocessor_config.json"
    config = json.loads(path.read_text())
    config["size"] = {"shortest_edge": pixels[0], "longest_edge": pixels[1]}
    path.write_text(json.dumps(config))


def test_trls_vllm_colocate_generates_every_turn_with_the_trained_weights_frames_and_caps(imprinted, tiny_qwen3,
                                                                                           synth_small, tmp_path):
    """TRL's own colocate path (``VLLMGeneration``: ``vllm.LLM``, ``llm.generate``, ``load_weights``) with vLLM stood
    in (``vllm_standin``, a subprocess: TRL decides on vLLM at import): every turn, tool turns with their crop frames
    included, is generated by vLLM at the checkpoint's own pads per frame (the stand-in refuses others, as vLLM
    does) and capped at the recipe's per-turn tokens; the weights vLLM generates with are the trainer's, pushed at
    each step."""
    import os
    import shutil
    import subprocess
    import sys

    model_dir = tmp_path / "imprinted"
    shutil.copytree(tiny_qwen3, model_dir)  # the checkpoint's processor and template, as vLLM reads them
    imprinted[0].save_pretrained(model_dir)  # its weights, imprinted
    with_local_budget(model_dir)  # check_vllm_pixels' advice: vLLM then processes frames at the trainer's budget
    log = tmp_path / "vllm.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(VLLM_STANDIN), *filter(None, [os.environ.get("PYTHONPATH")])]),
           "PARAVT_VLLM_LOG": str(log), "TRL_EXPERIMENTAL_SILENCE": "1", "OMP_NUM_THREADS": "1"}  # fmt: skip
    run = subprocess.run([sys.executable, "-c", VLLM_RUN, str(model_dir), str(synth_small[0]), str(tmp_path / "out"),
                          json.dumps(ENV), "96"], env=env, capture_output=True, text=True, timeout=900)  # fmt: skip
    assert run.returncode == 0, run.stderr[-4000:]
    result = json.loads(next(line for line in run.stdout.splitlines() if line.startswith("RESULT "))[7:])
    records = [json.loads(line) for line in log.read_text().splitlines()]
    requests = [r for r in records if "request" in r]
    loads = [r["weights"] for r in records if "weights" in r]
    print("vLLM requests:", len(requests), "images per request, most:", max(r["images"] for r in requests),
          "pads per image:", sorted({p for r in requests for p in r["pads_per_image"]}), "weight loads:", len(loads),
          "completion tokens, most:", max(r["completion_tokens"] for r in requests))  # the closing note's figures (-s)
    # the weights: the checkpoint's at the first generation, then the trainer's after step 1 before step 2's rollouts
    assert loads == [result["initial"], result["after_steps"][0]] and result["after_steps"][0] != result["initial"]
    # every turn from vLLM, capped per turn as the local trainer caps it, never at the whole completion length
    assert requests and all(r["max_tokens"] == 96 and r["completion_tokens"] <= 96 for r in requests)
    # turns after a crop reached vLLM with more images than the overview's frames, at the checkpoint's pads
    assert max(r["images"] for r in requests) > ENV["frame_budget"]
    pads = {p for r in requests for p in r["pads_per_image"]}
    assert len(pads) == 1  # one budget for every frame, overview and crops alike
    assert sum(h["tools/call_frequency"] for h in result["logs"]) > 0 and len(result["logs"]) == 2


VLLM_CONTRACT = r"""
import json, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
import numpy as np
from vllm import LLM, SamplingParams
from paravt.policies.hf import HFPolicy

model_dir, local_dir = sys.argv[1:3]
out = {}
try:
    SamplingParams(max_new_tokens=8)
except TypeError as exc:
    out["max_new_tokens"] = str(exc)
frame = np.random.default_rng(0).integers(0, 255, (320, 320, 3), dtype=np.uint8)
local = HFPolicy.from_pretrained(local_dir)  # the trainer's budget
llm = LLM(model=model_dir)  # the checkpoint's own budget, larger
_, grids = local.process_images([frame])
pads = int(grids[0].prod()) // local.merge_size**2
prompt = local.tokenizer.encode("look") + [local.image_pad_id] * pads
try:
    llm.generate([{"prompt_token_ids": prompt, "multi_modal_data": {"image": frame}}], SamplingParams(max_tokens=2))
except ValueError as exc:
    out["pads"] = str(exc)
try:
    llm.generate([{"prompt_token_ids": prompt}], SamplingParams(max_tokens=2, top_p=0.9))
except NotImplementedError as exc:
    out["top_p"] = str(exc)

# TRL's server mode up to its weight sync: a server answering what VLLMClient asks before it
class Server(BaseHTTPRequestHandler):
    def do_GET(self):
        body = {"/health": {}, "/v1/models": {"data": [{"id": model_dir}]}, "/get_world_size": {"world_size": 1},
                "/server_info": {"vllm_config": {"weight_transfer_config": {"backend": "nccl"}, "model_config": {}}}}.get(self.path.split("?")[0])
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps(body or {}).encode())
    def log_message(self, *a):
        pass
server = ThreadingHTTPServer(("127.0.0.1", 0), Server)
threading.Thread(target=server.serve_forever, daemon=True).start()
from paravt.learners.adapters.trl import grpo_trainer
from paravt_env import VideoToolEnv
from paravt_env.data import load_samples
samples = load_samples(sys.argv[3])[:2]
try:
    grpo_trainer(local_dir, env=lambda: VideoToolEnv(samples, **json.loads(sys.argv[4])), n_samples=2, output_dir=sys.argv[5],
                 use_vllm=True, vllm_mode="server", vllm_server_base_url=f"http://127.0.0.1:{server.server_port}",
                 per_device_train_batch_size=2, num_generations=2, use_cpu=True, report_to=[], max_completion_length=1024)
except NotImplementedError as exc:
    out["server"] = str(exc)
print("RESULT " + json.dumps(out))
"""


def test_the_vllm_standin_holds_vllms_contract_and_trls_server_mode_reaches_its_cuda_check(tiny_qwen3, synth_small,
                                                                                            tmp_path):
    """What the colocate test leans on: the stand-in refuses what vLLM refuses (``max_new_tokens``, which vLLM calls
    ``max_tokens``; a prompt whose image pads are not the checkpoint's for its image) and what it cannot serve as
    asked (``top_p``). TRL's server mode (``trl vllm-serve``) reaches TRL's own refusal to sync weights off CUDA."""
    import os
    import shutil
    import subprocess
    import sys

    local = tmp_path / "local"
    shutil.copytree(tiny_qwen3, local)
    with_local_budget(local)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(VLLM_STANDIN), *filter(None, [os.environ.get("PYTHONPATH")])]),
           "TRL_EXPERIMENTAL_SILENCE": "1", "OMP_NUM_THREADS": "1"}  # fmt: skip
    run = subprocess.run([sys.executable, "-c", VLLM_CONTRACT, str(tiny_qwen3), str(local), str(synth_small[0]),
                          json.dumps(ENV), str(tmp_path / "out")], env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stderr[-4000:]
    out = json.loads(next(line for line in run.stdout.splitlines() if line.startswith("RESULT "))[7:])
    assert "max_new_tokens" in out["max_new_tokens"]
    assert "image placeholders hold" in out["pads"]
    assert "top_p=0.9" in out["top_p"]
    assert "needs a CUDA device" in out["server"]
