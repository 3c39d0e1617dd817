"""GPU runbooks: a PARA-GRPO step at real size, the OpenRLHF executor episode, the session script."""
