"""HoloDeck 0.7.1 agent.yaml blocks that HoloDeck Web accepts but does not act on.

A HoloDeck user's own agent.yaml must load unchanged, so these blocks are modelled field for
field after HoloDeck's schema (unknown fields stay errors); the loader reports each one that is
set as a warning (``runs.core.agentconfig.compat``). ``ClaudeConfig`` honours parts of ``bash``,
``file_system`` and ``extended_thinking``; the rest has no effect here.
"""

from __future__ import annotations

from typing import Any, Literal

from runs.core.agentconfig.common import StrictModel


class ObservabilityConfig(StrictModel):
    """HoloDeck's ``ObservabilityConfig``."""

    disable_provider_tracing: bool | None = None
    enabled: bool | None = None
    exporters: ExportersConfig | None = None
    logs: LogsConfig | None = None
    metrics: MetricsConfig | None = None
    resource_attributes: dict[str, str] | None = None
    service_name: str | None = None
    traces: TracingConfig | None = None


class ExportersConfig(StrictModel):
    """HoloDeck's ``ExportersConfig``."""

    azure_monitor: AzureMonitorExporterConfig | None = None
    console: ConsoleExporterConfig | None = None
    otlp: OTLPExporterConfig | None = None
    prometheus: PrometheusExporterConfig | None = None


class AzureMonitorExporterConfig(StrictModel):
    """HoloDeck's ``AzureMonitorExporterConfig``."""

    connection_string: str | None = None
    disable_offline_storage: bool | None = None
    enabled: bool | None = None
    storage_directory: str | None = None


class ConsoleExporterConfig(StrictModel):
    """HoloDeck's ``ConsoleExporterConfig``."""

    enabled: bool | None = None
    include_timestamps: bool | None = None
    pretty_print: bool | None = None


class OTLPExporterConfig(StrictModel):
    """HoloDeck's ``OTLPExporterConfig``."""

    compression: str | None = None
    enabled: bool | None = None
    endpoint: str | None = None
    headers: dict[str, str] | None = None
    insecure: bool | None = None
    protocol: Literal["grpc", "http"] | None = None
    timeout_ms: int | None = None


class PrometheusExporterConfig(StrictModel):
    """HoloDeck's ``PrometheusExporterConfig``."""

    enabled: bool | None = None
    host: str | None = None
    path: str | None = None
    port: int | None = None


class LogsConfig(StrictModel):
    """HoloDeck's ``LogsConfig``."""

    enabled: bool | None = None
    filter_namespaces: list[str] | None = None
    include_trace_context: bool | None = None
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] | None = None


class MetricsConfig(StrictModel):
    """HoloDeck's ``MetricsConfig``."""

    enabled: bool | None = None
    export_interval_ms: int | None = None


class TracingConfig(StrictModel):
    """HoloDeck's ``TracingConfig``."""

    capture_content: bool | None = None
    capture_evaluation_content: bool | None = None
    enabled: bool | None = None
    max_export_batch_size: int | None = None
    max_queue_size: int | None = None
    redaction_patterns: list[str] | None = None
    sample_rate: float | None = None
    schedule_delay_millis: int | None = None


class DeploymentConfig(StrictModel):
    """HoloDeck's ``DeploymentConfig``."""

    environment: dict[str, str] | None = None
    health_check_path: str | None = None
    platform: str | None = None
    port: int | None = None
    protocol: Literal["rest", "ag-ui", "both"] | None = None
    registry: RegistryConfig
    runtime: Literal["container"] | None = None
    target: CloudTargetConfig


class RegistryConfig(StrictModel):
    """HoloDeck's ``RegistryConfig``."""

    credentials_env_prefix: str | None = None
    custom_tag: str | None = None
    repository: str
    tag_strategy: Literal["git_sha", "git_tag", "latest", "custom"] | None = None
    url: str


class CloudTargetConfig(StrictModel):
    """HoloDeck's ``CloudTargetConfig``."""

    aws: AWSAppRunnerConfig | None = None
    azure: AzureContainerAppsConfig | None = None
    gcp: GCPCloudRunConfig | None = None
    provider: Literal["aws", "gcp", "azure"]


class AWSAppRunnerConfig(StrictModel):
    """HoloDeck's ``AWSAppRunnerConfig``."""

    auto_scaling_max: int | None = None
    auto_scaling_min: int | None = None
    cpu: int | None = None
    ecr_role_arn: str | None = None
    health_check_path: str | None = None
    memory: int | None = None
    region: str


class GCPCloudRunConfig(StrictModel):
    """HoloDeck's ``GCPCloudRunConfig``."""

    concurrency: int | None = None
    cpu: int | None = None
    max_instances: int | None = None
    memory: str | None = None
    min_instances: int | None = None
    project_id: str
    region: str | None = None
    timeout: int | None = None


class AzureContainerAppsConfig(StrictModel):
    """HoloDeck's ``AzureContainerAppsConfig``."""

    cpu: float | None = None
    environment_name: str | None = None
    ingress_external: bool | None = None
    location: str | None = None
    max_replicas: int | None = None
    memory: str | None = None
    min_replicas: int | None = None
    resource_group: str
    subscription_id: str


class OpenAIConfig(StrictModel):
    """HoloDeck's ``OpenAIConfig``."""

    disable_default_hooks: bool | None = None
    disable_subprocess_env_scrub: bool | None = None
    disallowed_tools: list[str] | None = None
    effort: Literal["low", "medium", "high", "max"] | None = None
    fallback_model: str | None = None
    i_understand_this_is_unsafe: bool | None = None
    max_budget_usd: float | None = None
    max_concurrent_sessions: int | None = None
    max_turns: int | None = None
    permissions: OpenAIPermissionsConfig | None = None
    session_memory_estimate_mib: int | None = None


class OpenAIPermissionsConfig(StrictModel):
    """HoloDeck's ``OpenAIPermissionsConfig``."""

    allowed_tools: list[str] | None = None
    disallowed_tools: list[str] | None = None


class OptimizerConfig(StrictModel):
    """HoloDeck's ``OptimizerConfig``."""

    axes: AxesConfig | None = None
    loss: dict[str, float]
    max_cycles: int | None = None
    min_delta: float | None = None
    numeric_phase: PhaseConfig | None = None
    seed: int | None = None
    textual_phase: PhaseConfig | None = None


class AxesConfig(StrictModel):
    """HoloDeck's ``AxesConfig``."""

    numeric: list[NumericAxis] | None = None
    textual: list[TextualAxis] | None = None


class NumericAxis(StrictModel):
    """HoloDeck's ``NumericAxis``."""

    path: str
    range: list[Any]
    type: Literal["float", "int", "categorical"]


class TextualAxis(StrictModel):
    """HoloDeck's ``TextualAxis``."""

    max_chars: int | None = None
    path: str


class PhaseConfig(StrictModel):
    """HoloDeck's ``PhaseConfig``."""

    max_trials: int
    patience: int


class SubagentSpec(StrictModel):
    """HoloDeck's ``SubagentSpec``."""

    description: str
    model: Literal["sonnet", "opus", "haiku", "inherit"] | None = None
    prompt: str | None = None
    prompt_file: str | None = None
    tools: list[str] | None = None


class BashConfig(StrictModel):
    """HoloDeck's ``BashConfig``."""

    allow_unsafe: bool | None = None
    enabled: bool | None = None
    excluded_commands: list[str] | None = None


class FileSystemConfig(StrictModel):
    """HoloDeck's ``FileSystemConfig``."""

    edit: bool | None = None
    read: bool | None = None
    write: bool | None = None


class ExtendedThinkingConfig(StrictModel):
    """HoloDeck's ``ExtendedThinkingConfig``."""

    budget_tokens: int | None = None
    enabled: bool | None = None
