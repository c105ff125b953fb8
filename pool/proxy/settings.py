"""Decoder options per model: presets, a config file, flags, and a request's own override.

A chat backend knows its model, and the model decides what the decoder must know: which
formats it writes, whether its chat template opened ``<think>`` in the prompt (then the output
starts inside the reasoning). ``ModelSettings`` maps model names, or ``fnmatch`` patterns, to
codec options; a named ``preset`` stands for a family's options so that a user names the
family instead of reading the format docs. Options, in the order they apply (later wins):

1. ``defaults`` (the file's ``[defaults]``, or ``--preset``),
2. the first model entry whose name or pattern matches the request's ``model`` (exact names
   before patterns; flags before the file's entries),
3. the request's ``"toolcodec": {...}`` body field (removed before the request goes upstream).

A model entry may also name its model server: ``upstream = "http://host:port/v1"`` and,
optionally, ``upstream_key_env = "VAR"`` (the environment variable holding its API key, read
at start). Those are not decoder options: ``upstream_for`` answers them, the same way (exact
names before patterns), and a model no entry routes goes to ``--upstream``.

At each level a ``preset`` is expanded first and the level's other keys override it. The
result is a JSON object of ``ToolCallCodec`` options (``formats``, ``starts_in_reasoning``,
``nfkc_strings``, ``limits``), exactly what a ``decode`` job's ``options`` takes; ``limits``
may only lower the operator's (the workers clamp them, and so does ``resolve``).
"""

from __future__ import annotations

import fnmatch
import os
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolcodec.formats.presets import PRESETS  # family presets and vLLM parser names
from toolcodec.formats.reasoning import prefill_opener
from toolcodec.formats.registry import format_ids
from toolcodec.pool.model_labels import model_label, preset_of

OVERRIDE_FIELD = "toolcodec"  # the request body field; never sent upstream
OPTION_KINDS: dict[str, Any] = {"preset": str, "formats": list,
                                "starts_in_reasoning": (bool, str),  # or a reasoning family
                                "nfkc_strings": bool, "limits": dict}


UPSTREAM_KEYS = ("upstream", "upstream_key_env")  # a model entry's model server, not options


class SettingsError(ValueError):
    """A bad option, preset, pattern or config file; the message says which."""


@dataclass(frozen=True, slots=True)
class Upstream:
    """A model server some models are sent to, and its API key (None: the client's goes)."""

    url: str
    api_key: str | None = field(default=None, repr=False)  # never logged

    @property
    def base(self) -> str:
        url = self.url.rstrip("/")
        return url if url.endswith("/v1") else url + "/v1"


def check_upstream(entry: Mapping[str, Any], where: str) -> Upstream | None:
    """The model server a config entry names (None: it names none)."""
    url, var = entry.get("upstream"), entry.get("upstream_key_env")
    if url is None:
        if var is not None:
            raise SettingsError(f"{where}.upstream_key_env needs an upstream URL beside it")
        return None
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise SettingsError(f"{where}.upstream must be an http:// or https:// URL")
    key = None
    if var is not None:
        if not isinstance(var, str) or not var:
            raise SettingsError(f"{where}.upstream_key_env must name an environment variable")
        key = os.environ.get(var)
        if not key:
            raise SettingsError(f"{where}.upstream_key_env: {var} is not set")
    return Upstream(url, key)


def check_options(options: Any, where: str) -> dict[str, Any]:
    """*options* as a checked dict (a ``SettingsError`` names the bad key)."""
    if not isinstance(options, Mapping):
        raise SettingsError(f"{where} must be an object of decoder options")
    out: dict[str, Any] = {}
    for key, value in options.items():
        kind = OPTION_KINDS.get(key)
        if kind is None:
            raise SettingsError(f"{where}: unknown option {key!r}; expected some of "
                                f"{sorted(OPTION_KINDS)}")
        if not isinstance(value, kind) or (bool not in (kind if isinstance(kind, tuple)
                                                        else (kind,))
                                           and isinstance(value, bool)):
            names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
            raise SettingsError(f"{where}.{key} must be {names}")
        if key == "starts_in_reasoning" and isinstance(value, str):
            try:
                prefill_opener(value)
            except ValueError as exc:
                raise SettingsError(f"{where}.starts_in_reasoning: {exc}") from None
        if key == "preset" and value not in PRESETS:
            raise SettingsError(f"{where}.preset: unknown preset {value!r}; expected one of "
                                f"{sorted(PRESETS)}")
        if key == "formats":
            known = format_ids()  # installed families' ids included
            unknown = [f for f in value if f not in known]
            if unknown or not value:
                raise SettingsError(f"{where}.formats: unknown or no format ids {unknown}; "
                                    f"expected some of {list(known)}")
        if key == "limits":
            bad = [k for k, v in value.items() if k not in ("max_chars", "max_depth")
                   or isinstance(v, bool) or not isinstance(v, int) or v < 1]
            if bad:
                raise SettingsError(f"{where}.limits: {bad} must be max_chars or max_depth, "
                                    "positive integers")
        out[key] = list(value) if key == "formats" else value
    return out


def expand(options: Mapping[str, Any]) -> dict[str, Any]:
    """One level's options with its ``preset`` expanded (the level's own keys win)."""
    preset = options.get("preset")
    if preset is not None and preset not in PRESETS:
        raise SettingsError(f"unknown preset {preset!r}; expected one of {sorted(PRESETS)}")
    base = dict(PRESETS[preset]) if preset else {}
    return {**base, **{k: v for k, v in options.items() if k != "preset"}}


@dataclass(slots=True)
class ModelSettings:
    """Options per model name or pattern; see the module docstring."""

    defaults: dict[str, Any] = field(default_factory=dict)
    models: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # in match order
    upstreams: list[tuple[str, Upstream]] = field(default_factory=list)  # name or pattern
    # Per model name, what each of its requests needs, worked out on its first request
    # (``seen``); for the defaults and entries it was worked out from.
    _seen: dict[Any, tuple[dict[str, Any], str, str | None]] = field(
        default_factory=dict, init=False, repr=False, compare=False)
    _seen_of: tuple[Any, Any] = field(default=(None, None), init=False, repr=False,
                                      compare=False)

    @classmethod
    def build(cls, *, file: str | None = None, preset: str | None = None,
              model_presets: Iterable[str] = (), model_options: Iterable[str] = (),
              model_upstreams: Iterable[str] = ()) -> ModelSettings:
        """From the CLI: a config file, then flags (``--preset``, ``--model-preset
        PATTERN=PRESET``, ``--model-options PATTERN=JSON``, ``--model-upstream
        PATTERN=URL``), flags taking precedence."""
        import orjson

        settings = cls.load(file) if file else cls()
        routes = []
        for spec in model_upstreams:
            pattern, value = _split(spec, "--model-upstream")
            upstream = check_upstream({"upstream": value}, f"--model-upstream {pattern}")
            assert upstream is not None
            routes.append((pattern, upstream))
        flagged = {p for p, _ in routes}
        settings.upstreams = routes + [(p, u) for p, u in settings.upstreams
                                       if p not in flagged]
        flags: list[tuple[str, dict[str, Any]]] = []
        for spec in model_presets:
            pattern, value = _split(spec, "--model-preset")
            flags.append((pattern, check_options({"preset": value}, f"--model-preset {pattern}")))
        for spec in model_options:
            pattern, value = _split(spec, "--model-options")
            try:
                parsed = orjson.loads(value)
            except orjson.JSONDecodeError as exc:
                raise SettingsError(f"--model-options {pattern}: not JSON: {exc}") from None
            flags.append((pattern, check_options(parsed, f"--model-options {pattern}")))
        if preset:
            settings.defaults = {**settings.defaults,
                                 **check_options({"preset": preset}, "--preset")}
        # Flags come first in match order; for a name both give, the flag's keys win.
        file_entries = dict(settings.models)
        merged = _merged(flags)
        settings.models = [(p, {**file_entries.get(p, {}), **o}) for p, o in merged] + [
            (p, o) for p, o in settings.models if p not in dict(merged)]
        return settings

    @classmethod
    def load(cls, path: str) -> ModelSettings:
        """A TOML or YAML file: ``defaults`` (options) and ``models`` (name or pattern ->
        options), e.g. ``[models."deepseek-ai/*"]`` then ``preset = "deepseek-r1"``."""
        raw = Path(path).read_bytes()
        if path.endswith((".yaml", ".yml")):
            try:
                import yaml
            except ImportError:  # pragma: no cover - pyyaml ships with the test extras
                raise SettingsError(f"{path}: YAML config files need pyyaml installed; "
                                    "or write the file as TOML") from None
            try:
                data = yaml.safe_load(raw) or {}
            except yaml.YAMLError as exc:
                raise SettingsError(f"{path}: not YAML: {exc}") from None
        else:
            try:
                data = tomllib.loads(raw.decode())
            except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
                raise SettingsError(f"{path}: not TOML: {exc}") from None
        if not isinstance(data, dict) or set(data) - {"defaults", "models"}:
            raise SettingsError(f"{path}: expected the sections 'defaults' and 'models' only")
        models = data.get("models") or {}
        if not isinstance(models, dict):
            raise SettingsError(f"{path}: 'models' must map model names or patterns to options")
        entries, upstreams = [], []
        for name, opts in models.items():
            where = f"{path}: models.{name}"
            if isinstance(opts, Mapping):
                upstream = check_upstream(opts, where)
                if upstream is not None:
                    upstreams.append((str(name), upstream))
                if upstream is not None and set(opts) <= set(UPSTREAM_KEYS):
                    continue  # a route only: the model's options come from the other entries
                opts = {k: v for k, v in opts.items() if k not in UPSTREAM_KEYS}
            entries.append((str(name), check_options(opts, where)))
        return cls(check_options(data.get("defaults") or {}, f"{path}: defaults"),
                   _merged(entries), upstreams)

    def for_model(self, model: Any) -> dict[str, Any]:
        """The options for *model* (defaults, then its entry), presets expanded."""
        options = expand(self.defaults)
        entry = self.entry(model) if isinstance(model, str) else None
        if entry is not None:
            options.update(expand(entry))
        return options

    def entry(self, model: str) -> dict[str, Any] | None:
        for pattern, options in self.models:
            if pattern == model:
                return options
        for pattern, options in self.models:
            if _is_pattern(pattern) and fnmatch.fnmatchcase(model, pattern):
                return options
        return None

    def upstream_for(self, model: Any) -> Upstream | None:
        """The model server configured for *model* (None: the default ``--upstream``)."""
        if not isinstance(model, str) or not self.upstreams:
            return None
        for pattern, upstream in self.upstreams:
            if pattern == model:
                return upstream
        for pattern, upstream in self.upstreams:
            if _is_pattern(pattern) and fnmatch.fnmatchcase(model, pattern):
                return upstream
        return None

    def resolve(self, model: Any, override: Any = None, where: str = OVERRIDE_FIELD,
                seen: tuple[dict[str, Any], str, str | None] | None = None) -> dict[str, Any]:
        """The options for one request: its model's, then its ``"toolcodec"`` field's.
        Raises ``SettingsError`` for a bad override (the client's error: 400). *seen*: what
        :meth:`seen` answered for *model*, when the caller has it."""
        options = dict((seen or self.seen(model))[0])
        if override is not None:
            options.update(expand(check_options(override, where)))
        return options

    def seen(self, model: Any) -> tuple[dict[str, Any], str, str | None]:
        """(``for_model(model)``, its metric label, its entry's or the defaults' preset),
        kept per model name: a proxy asks on every request. Not to be changed."""
        if self._seen_of[0] is not self.defaults or self._seen_of[1] is not self.models:
            self._seen, self._seen_of = {}, (self.defaults, self.models)
        key = model if isinstance(model, str) else None
        held = self._seen.get(key)
        if held is None:
            if len(self._seen) >= _SEEN_MODELS:  # names come from clients: bounded
                self._seen.clear()
            held = self._seen[key] = (self.for_model(model), model_label(self, model),
                                      preset_of(self, model, None))
        return held

    def describe(self) -> dict[str, Any]:
        """What is configured, as JSON (for logs and docs)."""
        return {"defaults": self.defaults, "models": dict(self.models),
                "upstreams": {p: u.url for p, u in self.upstreams}}


_SEEN_MODELS = 256  # model names kept by ``ModelSettings.seen``


def _split(spec: str, flag: str) -> tuple[str, str]:
    pattern, sep, value = spec.partition("=")
    if not sep or not pattern.strip() or not value.strip():
        raise SettingsError(f"{flag} takes PATTERN=VALUE, got {spec!r}")
    return pattern.strip(), value.strip()


def _is_pattern(name: str) -> bool:
    return any(c in name for c in "*?[")


def _merged(entries: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    """Entries for the same pattern merged (later keys win), first position kept."""
    out: dict[str, dict[str, Any]] = {}
    for pattern, options in entries:
        out[pattern] = {**out.get(pattern, {}), **options}
    return list(out.items())


def job_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Codec options as a job payload's ``options`` (JSON: lists, not tuples or sets)."""
    out: dict[str, Any] = {}
    for key, value in expand(options).items():
        if value is None:
            continue
        if key == "formats":
            value = sorted(set(value))
        elif key == "limits" and not isinstance(value, dict):
            value = {"max_chars": value.max_chars, "max_depth": value.max_depth}
        out[key] = value
    return out
