"""vLLM's NCCL weight-transfer rendezvous (TRL's server mode imports it): NCCL needs CUDA, so the stand-in refuses."""


def trainer_init(*args, **kwargs):
    raise NotImplementedError("vLLM's NCCL weight transfer needs CUDA devices (vllm_standin)")
