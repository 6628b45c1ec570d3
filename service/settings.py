"""All settings, from ERRTRIAGE_* environment variables (and `serve` flags). Built once, passed down."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from service.errors import SettingsInvalid

DEFAULT_RULES_DIR = Path(__file__).resolve().parent.parent / "rules"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ERRTRIAGE_", extra="ignore", frozen=True)

    rules_dir: Path = Field(DEFAULT_RULES_DIR, description="The rule tables: classes/, providers/, routes/, ...")
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    workers: int = Field(1, ge=1, le=64)
    reload_rules: bool = Field(True, description="Watch the rules directory and reload on change.")
    admin_token: SecretStr | None = Field(None, description="Bearer token for admin endpoints; unset disables them.")

    smtp_host: str | None = None
    smtp_port: int = Field(587, ge=1, le=65535)
    smtp_username: str | None = None
    smtp_password: SecretStr | None = None
    smtp_tls: Literal["none", "starttls", "tls"] = "starttls"
    smtp_from: str = "errtriage@localhost"
    smtp_timeout_seconds: float = Field(10.0, gt=0, le=300)

    max_body_bytes: int = Field(1024 * 1024, ge=1024, le=64 * 1024 * 1024)
    log_format: Literal["json", "text"] = "json"
    log_level: Literal["debug", "info", "warning", "error"] = "info"

    fallback: Literal["on", "off"] = Field("on", description="The learned fallback for what no rule matches.")
    fallback_min_confidence: float = Field(0.65, ge=0, le=1,
                                           description="Below this probability the fallback answers unknown.")
    regex_scanner: Literal["on", "off"] = Field(
        "on", description="Match the message regexes with Hyperscan once it has compiled them after a load "
        "(seconds of CPU, in the background); off: RE2's set alone, slower on ever-new messages.")

    notify_enabled: bool = True
    notify_queue_size: int = Field(10_000, ge=1, le=1_000_000)
    notify_workers: int = Field(4, ge=1, le=64)
    notify_deadline_seconds: float = Field(600.0, gt=0, description="Give up on a notification after this long.")
    notify_retry_base_seconds: float = Field(1.0, gt=0, le=600, description="First retry backoff step (doubles).")
    notify_retry_max_seconds: float = Field(60.0, gt=0, le=3600, description="Largest backoff step.")
    notify_test_deadline_seconds: float = Field(15.0, gt=0, le=300,
                                                description="Retries of POST /v1/notifications/test stop after this.")
    notify_throttle_max_keys: int = Field(100_000, ge=100, le=10_000_000, description="Throttle groups remembered.")
    redis_url: str | None = Field(None, description="Shared state across processes (redis://host:6379/0); "
                                  "unset: throttle and queue in this process.")
    notify_claim_seconds: float = Field(30.0, gt=0, le=3600, description="A notification another process has "
                                        "held this long without refreshing it is claimed (XAUTOCLAIM).")
    notify_stream_max_length: int = Field(100_000, ge=10, le=100_000_000,
                                          description="Notifications the Redis stream holds; past it, dropped.")
    shutdown_grace_seconds: float = Field(20.0, ge=0, le=600)
    multiproc_dir: Path | None = Field(None, description="prometheus-client multiprocess directory (workers > 1).")
    unknowns_max_groups: int = Field(1000, ge=10, le=1_000_000,
                                     description="Groups the unknowns inbox keeps (space-saving top-K).")
    unknowns_buffer_size: int = Field(10_000, ge=1, le=1_000_000,
                                      description="Unknown reports waiting to be recorded; past it, not recorded.")

    @property
    def fallback_threshold(self) -> float | None:
        """What the loader takes: the minimum confidence, or None with the fallback off."""
        return self.fallback_min_confidence if self.fallback == "on" else None

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        if self.smtp_password is not None and not self.smtp_username:
            raise ValueError("smtp_password is set but smtp_username is not")
        if self.redis_url is not None and not self.redis_url.strip():
            object.__setattr__(self, "redis_url", None)  # ERRTRIAGE_REDIS_URL= (empty) means unset
        if self.smtp_tls == "tls" and self.smtp_port == 587:
            object.__setattr__(self, "smtp_port", 465)
        return self


def load_settings(**overrides: object) -> Settings:
    """Settings from the environment plus explicit overrides. Raises SettingsInvalid with one clear line."""
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})  # type: ignore[arg-type]
    except ValidationError as exc:
        first = exc.errors()[0]
        name = ".".join(str(p) for p in first["loc"]) or "settings"
        env = f"ERRTRIAGE_{name.upper()}" if first["loc"] else name
        secret = any(word in name for word in ("password", "token"))
        shown = "" if secret or not first["loc"] else f" (got {first.get('input')!r})"
        raise SettingsInvalid(f"invalid setting {env}: {first['msg']}{shown}") from exc
