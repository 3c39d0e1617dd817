"""The names OpenRLHF imports from ``flash_attn.bert_padding`` (see the package docstring); none runs."""

from flash_attn import refuse

index_first_axis = refuse("bert_padding.index_first_axis")
pad_input = refuse("bert_padding.pad_input")
rearrange = refuse("bert_padding.rearrange")
unpad_input = refuse("bert_padding.unpad_input")
