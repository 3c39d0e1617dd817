"""Tools: ``crop_video`` validation and execution, parallel or sequential dispatch, and sub-agents."""

from .crop import TOOL_NAME, CropRequest, CropResult, CropSettings, execute_crop, validate_crop
from .dispatch import DISPATCH_MODES, TOOL_RESULT_MODES, TurnToolReport, run_tool_calls
from .render import render_tool_responses
from .subagent import (
    PENDING_SUBAGENT,
    SUBAGENT_SYSTEM_PROMPT,
    BatchSubAgent,
    PendingSubAgent,
    SubAgent,
    SubAgentRequest,
)

__all__ = [
    "PENDING_SUBAGENT",
    "PendingSubAgent",
    "DISPATCH_MODES",
    "SUBAGENT_SYSTEM_PROMPT",
    "TOOL_NAME",
    "TOOL_RESULT_MODES",
    "BatchSubAgent",
    "CropRequest",
    "CropResult",
    "CropSettings",
    "SubAgent",
    "SubAgentRequest",
    "TurnToolReport",
    "execute_crop",
    "render_tool_responses",
    "run_tool_calls",
    "validate_crop",
]
