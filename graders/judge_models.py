"""Judge models for the LLM-judge metrics: a plain ``JudgeSpec`` -> one of deepeval's own models.

The engine resolves which model judges a metric (metric ``model`` > ``evaluations.model`` > the
agent's model) and hands us a ``JudgeSpec``. We build deepeval's native model class for the
provider with every setting passed explicitly, so nothing is read from ``.env`` files or from
deepeval's own ``OPENAI_API_KEY``-style settings: a judge without a key in its spec is an error,
not a silent fallback to whatever key the worker's environment happens to hold.

deepeval is imported in one place, ``deepeval_api()``, on first use (it costs about three seconds)
and only after ``quiet_deepeval()`` has switched off its telemetry, dotenv loading, tracing and
internal retries.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from deepeval.models import DeepEvalBaseLLM

JudgeProvider = Literal["openai", "azure_openai", "anthropic", "ollama"]

PROVIDERS_NEEDING_KEY = frozenset({"openai", "azure_openai", "anthropic"})
DEFAULT_OLLAMA_ENDPOINT = "http://localhost:11434"

# Set before deepeval is first imported: it reads most of these once, at import time.
_DEEPEVAL_ENV: dict[str, str] = {
    # No anonymous usage events to PostHog, and no ~/.deepeval telemetry id file.
    "DEEPEVAL_TELEMETRY_OPT_OUT": "YES",
    # deepeval otherwise merges .env / .env.local from the working directory into os.environ.
    "DEEPEVAL_DISABLE_DOTENV": "1",
    # Judge calls are not traced to Confident AI.
    "CONFIDENT_TRACING_ENABLED": "NO",
    # One attempt per provider request: retries are ours (``retries``), so that ``retry_count``
    # and ``timeout_ms`` mean what the user configured, not that times deepeval's backoff.
    "DEEPEVAL_RETRY_MAX_ATTEMPTS": "1",
    "DEEPEVAL_UPDATE_WARNING_OPT_IN": "0",
    "DEEPEVAL_VERBOSE_MODE": "0",
}


def quiet_deepeval() -> None:
    """Configure deepeval's environment switches; a value the operator set explicitly wins."""
    for key, value in _DEEPEVAL_ENV.items():
        os.environ.setdefault(key, value)


quiet_deepeval()


@functools.cache
def deepeval_api() -> SimpleNamespace:
    """deepeval's modules the judges use (``errors``, ``metrics``, ``models``, ``test_case``),
    imported once, on first use, after ``quiet_deepeval()``."""
    quiet_deepeval()
    # lazy: deepeval costs ~3 s at import and only judged metrics need it
    from deepeval import errors, metrics, models, test_case

    return SimpleNamespace(errors=errors, metrics=metrics, models=models, test_case=test_case)


class JudgeConfigError(ValueError):
    """The judge cannot be built from its spec (missing key, endpoint, package...)."""


@dataclass(frozen=True)
class JudgeSpec:
    """Which model judges a metric, with everything needed to reach it."""

    provider: JudgeProvider
    name: str
    endpoint: str | None = None
    # Kept out of repr so a spec never leaks its key into logs or error messages.
    api_key: str | None = field(default=None, repr=False)
    api_version: str | None = None
    # Judges default to 0.0: the same answer graded twice should get the same verdict.
    temperature: float | None = None

    @property
    def label(self) -> str:
        return f"{self.provider}/{self.name}"


def judge_model_for(spec: JudgeSpec) -> DeepEvalBaseLLM:
    """Build deepeval's native model for ``spec``; raises ``JudgeConfigError`` when it can't."""
    _check_spec(spec)
    quiet_deepeval()
    builders = {
        "openai": _openai_model,
        "azure_openai": _azure_model,
        "anthropic": _anthropic_model,
        "ollama": _ollama_model,
    }
    return builders[spec.provider](spec)


def _check_spec(spec: JudgeSpec) -> None:
    if spec.provider not in ("openai", "azure_openai", "anthropic", "ollama"):
        raise JudgeConfigError(
            f"judge provider {spec.provider!r} cannot grade (use openai, azure_openai, "
            f"anthropic or ollama) for judge {spec.label}"
        )
    if not spec.name:
        raise JudgeConfigError(f"no model name for judge {spec.provider}")
    if spec.provider in PROVIDERS_NEEDING_KEY and not spec.api_key:
        raise JudgeConfigError(f"no API key for judge {spec.label}")
    if spec.provider == "azure_openai":
        if not spec.endpoint:
            raise JudgeConfigError(f"no endpoint for judge {spec.label}")
        if not spec.api_version:
            raise JudgeConfigError(f"no api_version for judge {spec.label}")


def _temperature(spec: JudgeSpec) -> float:
    return 0.0 if spec.temperature is None else float(spec.temperature)


def _openai_model(spec: JudgeSpec) -> DeepEvalBaseLLM:
    return _openai_judge_class()(
        model=spec.name,
        api_key=spec.api_key,
        base_url=spec.endpoint,
        temperature=_temperature(spec),
    )


def _azure_model(spec: JudgeSpec) -> DeepEvalBaseLLM:
    # agent.yaml names the Azure deployment in ``name``; deepeval wants it as both the model
    # (for its capability/price table) and the deployment it sends requests to.
    return deepeval_api().models.AzureOpenAIModel(
        model=spec.name,
        deployment_name=spec.name,
        api_key=spec.api_key,
        base_url=spec.endpoint,
        api_version=spec.api_version,
        temperature=_temperature(spec),
    )


def _anthropic_model(spec: JudgeSpec) -> DeepEvalBaseLLM:
    extra: dict[str, Any] = {"base_url": spec.endpoint} if spec.endpoint else {}
    # Extra keyword arguments go straight to the anthropic client (base_url included).
    return deepeval_api().models.AnthropicModel(
        model=spec.name,
        api_key=spec.api_key,
        temperature=_temperature(spec),
        **extra,
    )


def _ollama_model(spec: JudgeSpec) -> DeepEvalBaseLLM:
    endpoint = (spec.endpoint or DEFAULT_OLLAMA_ENDPOINT).rstrip("/")
    if importlib.util.find_spec("ollama") is not None:
        host = endpoint.removesuffix("/v1")  # the native client wants the bare host
        return deepeval_api().models.OllamaModel(
            model=spec.name, base_url=host, temperature=_temperature(spec)
        )
    # Without the ``ollama`` package, talk to Ollama's OpenAI-compatible API (``/v1``) through
    # deepeval's LocalModel; Ollama ignores the key but the OpenAI client insists on one.
    base_url = endpoint if endpoint.endswith("/v1") else f"{endpoint}/v1"
    return deepeval_api().models.LocalModel(
        model=spec.name,
        api_key=spec.api_key or "ollama",
        base_url=base_url,
        temperature=_temperature(spec),
    )


@functools.cache
def _openai_judge_class() -> type[DeepEvalBaseLLM]:
    """deepeval's ``OpenAIModel`` with two fixes, found by the tests over HTTP.

    - deepeval reads ``completion.usage.prompt_tokens`` after every request, so a server that
      sends no ``usage`` (it is optional in the API) would turn every valid verdict into an
      ``AttributeError``. Our clients fill a missing ``usage`` with zero tokens; the graders
      record no judge usage for a grade whose requests reported no tokens.
    - deepeval builds a new client for every request, and each one loads a fresh TLS context
      (~0.1 s of CPU that blocks the event loop and eats into ``timeout_ms``). A model is built
      per grade, inside that grade's event loop, so it keeps one client per mode.
    """

    # OpenAIModel: GPTModel is its deprecated alias.
    class OpenAIJudgeModel(deepeval_api().models.OpenAIModel):  # type: ignore[misc]
        def load_model(self, async_mode: bool = False) -> Any:
            clients: dict[bool, Any] = self.__dict__.setdefault("_judge_clients", {})
            if async_mode not in clients:
                clients[async_mode] = _filling_usage(super().load_model(async_mode=async_mode))
            return clients[async_mode]

    return OpenAIJudgeModel


def _filling_usage(client: Any) -> Any:
    """The openai client (sync or async), its responses read with ``usage`` filled in: every
    response of the client, streamed or not, goes through its ``_process_response_data``."""
    process = client._process_response_data

    def process_with_usage(*, data: object, **kwargs: Any) -> Any:
        return process(data=_with_usage(data), **kwargs)

    client._process_response_data = process_with_usage
    return client


def _with_usage(data: object) -> object:
    if isinstance(data, dict) and "choices" in data and data.get("usage") is None:
        return {**data, "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}
    return data
