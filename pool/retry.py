"""Retry a generation that could not be decoded, with the errors fed back to the model.

``decode_with_retry(generate, messages, tools=TOOLS)`` calls ``generate(messages)`` (the
caller's model call: it returns the model's text or an OpenAI assistant message), decodes the
answer, and — when decoding failed for a reason the model can fix — appends the assistant's
answer and a feedback message (``toolcodec.results.feedback``) and calls again, up to
``RetryPolicy.max_retries`` times. Every attempt is returned, so the caller can log or show
them. ``adecode_with_retry`` is the same for an async ``generate``.

Decoding runs in-process by default, or through a ``pool.Pool`` (``pool=``) so a huge output
cannot block the caller past the job budget; a job that did not run (timeout, lost worker,
back-pressure) is our failure, not the model's, and is never retried.

``toolcodec_retries_total{outcome}`` counts each decoding that needed the loop: ``recovered``
(a retry succeeded), ``exhausted`` (still failing after the last retry), ``not_retryable``
(an error the model cannot fix, or one of ours).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import toolcodec as codec
from prometheus_client import REGISTRY, CollectorRegistry, Counter
from toolcodec.results.feedback import RETRYABLE_CODES, Feedback, build_feedback

Output = str | dict[str, Any]
Style = Literal["openai", "anthropic", "hermes", "text"]
Outcome = Literal["ok", "recovered", "exhausted", "not_retryable", "disabled"]

ENV_ENABLED = "TOOLCODEC_RETRY_ENABLED"
ENV_MAX = "TOOLCODEC_RETRY_MAX"
MAX_RETRIES_CEILING = 10  # a misconfigured loop must not call a paid model forever


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How many times to ask the model again, and for which error codes."""

    max_retries: int = 2
    enabled: bool = True
    retryable_codes: frozenset[str] = RETRYABLE_CODES

    def __post_init__(self) -> None:
        if isinstance(self.max_retries, bool) or not isinstance(self.max_retries, int) or not (
                0 <= self.max_retries <= MAX_RETRIES_CEILING):
            raise ValueError(f"max_retries must be an integer from 0 to {MAX_RETRIES_CEILING}, "
                             f"got {self.max_retries!r}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RetryPolicy:
        """``TOOLCODEC_RETRY_ENABLED`` (1/0, true/false, yes/no; default on) and
        ``TOOLCODEC_RETRY_MAX`` (default 2). A malformed value raises ``ValueError``."""
        env = os.environ if environ is None else environ
        raw = env.get(ENV_ENABLED, "1").strip().lower()
        if raw not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
            raise ValueError(f"{ENV_ENABLED} must be 1/0, true/false, yes/no or on/off, "
                             f"got {raw!r}")
        try:
            retries = int(env.get(ENV_MAX, "2"))
        except ValueError:
            raise ValueError(f"{ENV_MAX} must be an integer, got {env.get(ENV_MAX)!r}") from None
        return cls(max_retries=retries, enabled=raw in ("1", "true", "yes", "on"))

    def should_retry(self, feedback: Feedback) -> bool:
        return bool(feedback.codes) and all(c in self.retryable_codes for c in feedback.codes)


@dataclass(slots=True)
class Attempt:
    """One call of ``generate``: what the model said, how it decoded, the feedback sent."""

    output: Output
    result: dict[str, Any]
    feedback: Feedback | None = None


@dataclass(slots=True)
class RetryRun:
    """The last result, the outcome, and every attempt in order."""

    outcome: Outcome
    attempts: list[Attempt] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)  # as sent on the last call

    @property
    def result(self) -> dict[str, Any]:
        return self.attempts[-1].result


# -- metrics -------------------------------------------------------------------------------

_COUNTERS: dict[int, Counter] = {}


def retries_counter(registry: CollectorRegistry = REGISTRY) -> Counter:
    """``toolcodec_retries_total{outcome}`` on *registry* (created once per registry)."""
    found = _COUNTERS.get(id(registry))
    if found is None:
        found = Counter("toolcodec_retries_total",
                        "Decodings that needed the retry loop, by outcome "
                        "(recovered, exhausted, not_retryable).", ["outcome"], registry=registry)
        _COUNTERS[id(registry)] = found
    return found


# -- the loop ------------------------------------------------------------------------------


class _Loop:
    """The decisions of the retry loop, shared by the sync and async drivers."""

    def __init__(self, messages: list[dict[str, Any]], tools: list[dict] | None,
                 policy: RetryPolicy, style: Style, registry: CollectorRegistry | None) -> None:
        self.messages = list(messages)
        self.tools, self.policy, self.style = tools, policy, style
        self.run = RetryRun("ok", messages=self.messages)
        self.registry = REGISTRY if registry is None else registry

    def payload(self, output: Output) -> dict[str, Any]:
        key = "message" if isinstance(output, dict) else "text"
        return {key: output, "tools": self.tools or []}

    def record(self, output: Output, result: dict[str, Any], ours: bool) -> bool:
        """Record an attempt; True when another call of ``generate`` should follow."""
        attempt = Attempt(output, result)
        self.run.attempts.append(attempt)
        if result.get("ok"):
            self.run.outcome = "recovered" if len(self.run.attempts) > 1 else "ok"
            return self._done()
        feedback = build_feedback(result, tools=self.tools)
        attempt.feedback = feedback
        if not self.policy.enabled:
            self.run.outcome = "disabled"
            return False
        if ours or not self.policy.should_retry(feedback):
            self.run.outcome = "not_retryable"
            return self._done()
        if len(self.run.attempts) > self.policy.max_retries:
            self.run.outcome = "exhausted"
            return self._done()
        self.messages.append(output if isinstance(output, dict)
                             else {"role": "assistant", "content": output})
        self.messages.extend(_shape(feedback, self.style, output))
        self.run.messages = list(self.messages)
        return True

    def _done(self) -> bool:
        if self.run.outcome != "ok":
            retries_counter(self.registry).labels(self.run.outcome).inc()
        return False


def decode_with_retry(generate: Callable[[list[dict[str, Any]]], Output],
                      messages: list[dict[str, Any]], *, tools: list[dict] | None = None,
                      policy: RetryPolicy | None = None, style: Style = "openai",
                      pool: Any = None, registry: CollectorRegistry | None = None) -> RetryRun:
    """Call ``generate(messages)`` and decode; on a fixable failure, feed the errors back and
    call again, at most ``policy.max_retries`` more times. Returns every attempt."""
    loop = _Loop(messages, tools, policy or RetryPolicy.from_env(), style, registry)
    while True:
        output = generate(list(loop.messages))
        if pool is None:
            result, ours = _decode_here(output, tools), False
        else:
            result, ours = _from_envelope(pool.submit("decode", loop.payload(output)))
        if not loop.record(output, result, ours):
            return loop.run


async def adecode_with_retry(generate: Callable[[list[dict[str, Any]]], Awaitable[Output]],
                             messages: list[dict[str, Any]], *, tools: list[dict] | None = None,
                             policy: RetryPolicy | None = None, style: Style = "openai",
                             pool: Any = None,
                             registry: CollectorRegistry | None = None) -> RetryRun:
    """``decode_with_retry`` for an async ``generate`` (decoding through ``pool.asubmit``
    when a pool is given, so the event loop never waits on a parse)."""
    loop = _Loop(messages, tools, policy or RetryPolicy.from_env(), style, registry)
    while True:
        output = await generate(list(loop.messages))
        if pool is None:
            result, ours = _decode_here(output, tools), False
        else:
            result, ours = _from_envelope(await pool.asubmit("decode", loop.payload(output)))
        if not loop.record(output, result, ours):
            return loop.run


def _decode_here(output: Output, tools: list[dict] | None) -> dict[str, Any]:
    return codec.decode(output, tools=tools).to_dict()


def _from_envelope(envelope: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The decode result of a job envelope, and whether a failure was ours (job not run)."""
    if envelope.get("status") == "ok" and isinstance(envelope.get("result"), dict):
        return envelope["result"], False
    error = envelope.get("error") or {"code": envelope.get("status"), "message": "job failed"}
    return {"ok": False, "path": "none", "calls": [], "content": "", "reasoning": None,
            "repairs": [], "errors": [error]}, True


def _shape(feedback: Feedback, style: Style, output: Output) -> list[dict[str, Any]]:
    if style == "openai":
        return feedback.as_openai(output if isinstance(output, dict) else None)
    if style == "anthropic":
        return [feedback.as_anthropic()]
    if style == "hermes":
        return [feedback.as_hermes()]
    return [{"role": "user", "content": feedback.text}]
