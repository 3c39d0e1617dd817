"""A stand-in for flash-attn (CUDA kernels, compiled against a CUDA toolkit at install; no CPU build), so that
OpenRLHF's ``train_ppo_ray`` can be imported on a machine without a GPU: ``openrlhf.models.ring_attn_utils`` imports
four names of ``flash_attn.bert_padding`` and ``flash_attn.utils.distributed.all_gather`` at module level. Every
name here refuses to run: the test that puts this folder on the path (the printed OpenRLHF command up to its first
GPU request) shows that nothing before that request needs flash-attn.
"""

__version__ = "2.8.3"  # openrlhf 0.11.2's pin


def refuse(name: str):
    def gpu_only(*args, **kwargs):
        raise RuntimeError(f"flash_attn.{name} is a stand-in: flash-attn runs on CUDA GPUs only")

    gpu_only.__name__ = name.rsplit(".", 1)[-1]
    return gpu_only
