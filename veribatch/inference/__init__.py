"""Model engines behind one interface (`inference.types.Engine`).

Tasks call `open_engine("hf:PATH" | "vllm:NAME" | "openai:NAME" | "replay:RUN_DIR")` and
never learn which backend answered.  Heavy backends are imported only when asked for.
"""

from veribatch.inference.errors import EngineError, MissingExtraError, UnknownEngineError
from veribatch.inference.records import completion_from_record, completion_to_record, request_key
from veribatch.inference.registry import open_engine, parse_spec, pooled_engines, shared_engines
from veribatch.inference.types import Completion, Engine, Message, Request, Sampling

__all__ = [
    "Completion",
    "Engine",
    "EngineError",
    "Message",
    "MissingExtraError",
    "UnknownEngineError",
    "Request",
    "Sampling",
    "completion_from_record",
    "completion_to_record",
    "open_engine",
    "parse_spec",
    "pooled_engines",
    "request_key",
    "shared_engines",
]
