"""vLLM's packed NCCL broadcast (TRL's server mode imports it): NCCL needs CUDA, so the stand-in refuses."""


def packed_nccl_broadcast_producer(*args, **kwargs):
    raise NotImplementedError("vLLM's NCCL weight transfer needs CUDA devices (vllm_standin)")
