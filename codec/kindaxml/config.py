"""Configuration of the KindaXML parser: one frozen, validated object.

Config errors are the caller's bug, so they raise (``TypeError`` for a wrong type or an
unknown key, ``ValueError`` for a bad value); the text being parsed never does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any

TAG_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_\-:.]*")

DEFAULT_RECOGNIZED_TAGS = frozenset({"cite", "claim", "todo", "metric", "risk", "note", "label"})

UNKNOWN_MODES = ("passthrough", "strip", "treat_as_text")
STRAY_END_TAG_POLICIES = ("drop", "passthrough")
DUPLICATE_ATTRIBUTE_POLICIES = ("last_wins", "first_wins", "keep_list")
RECOVERY_STRATEGIES = (
    "retro_line",
    "forward_until_tag",
    "forward_until_newline",
    "forward_next_token",
    "noop",
)
SELF_CLOSING_STRATEGIES = (
    "marker",
    "retro_line",
    "forward_until_tag",
    "forward_until_newline",
    "forward_next_token",
)

# Section 6.5 of the spec recommends these per tag; every other tag uses the "*" entry.
DEFAULT_RECOVERY_STRATEGY = MappingProxyType(
    {"*": "retro_line", "note": "forward_until_tag", "label": "forward_next_token"}
)
DEFAULT_SELF_CLOSING_STRATEGY = MappingProxyType({"*": "marker"})


def _frozen_names(value: Any) -> frozenset[str] | None:
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise TypeError(
            "recognized_tags must be an iterable of tag names (e.g. {'cite', 'note'}) or None "
            f"for 'every tag', not {type(value).__name__}"
        )
    names = frozenset(value)
    for name in names:
        if not isinstance(name, str) or not TAG_NAME.fullmatch(name):
            raise ValueError(
                f"recognized_tags: {name!r} is not a tag name (expected [A-Za-z][A-Za-z0-9_-:.]*)"
            )
    return names


def _strategy_map(
    key: str, value: Any, defaults: Mapping[str, str], allowed: tuple[str, ...]
) -> Mapping[str, str]:
    if not isinstance(value, Mapping):
        raise TypeError(
            f"{key} must be a mapping of tag name -> strategy, not {type(value).__name__}"
        )
    merged = dict(defaults)
    for tag, strategy in value.items():
        if not isinstance(tag, str) or not (tag == "*" or TAG_NAME.fullmatch(tag)):
            raise ValueError(f"{key}: {tag!r} is neither a tag name nor '*'")
        if strategy not in allowed:
            raise ValueError(f"{key}[{tag!r}]: {strategy!r} is not one of {', '.join(allowed)}")
        merged[tag] = strategy
    return MappingProxyType(merged)


def _choice(key: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{key} must be one of {', '.join(allowed)}; got {value!r}")


def _flag(key: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{key} must be True or False, not {type(value).__name__}")


@dataclass(frozen=True)
class KindaXMLConfig:
    """How :func:`toolcodec.kindaxml.parse` reads a document. Keyword names follow spec §12.

    ``recognized_tags``: tag names that carry meaning; ``None`` recognises every well-formed
    name. ``unknown_mode``: what other tags become (``passthrough`` keeps them as literal
    text, ``strip`` removes the tag syntax, ``treat_as_text`` makes ``<...>`` plain text with
    no structural effect). ``autoclose_on_any_tag``: an open tag is closed by the next tag of
    any kind (True) or only by the next recognised tag (False). ``per_tag_recovery_strategy``
    and ``self_closing_strategy`` are merged over the defaults; the key ``"*"`` sets the
    strategy of tags not named. ``trim_punctuation`` trims recovered spans.
    ``duplicate_attribute_policy``: ``last_wins``, ``first_wins`` or ``keep_list``.
    ``backslash_escapes`` enables ``\\<`` and ``\\>`` in text (spec §7.3).
    """

    recognized_tags: frozenset[str] | None = DEFAULT_RECOGNIZED_TAGS
    unknown_mode: str = "passthrough"
    autoclose_on_any_tag: bool = True
    per_tag_recovery_strategy: Mapping[str, str] = field(
        default_factory=lambda: DEFAULT_RECOVERY_STRATEGY
    )
    self_closing_strategy: Mapping[str, str] = field(
        default_factory=lambda: DEFAULT_SELF_CLOSING_STRATEGY
    )
    trim_punctuation: bool = False
    case_sensitive_tags: bool = True
    stray_end_tag_policy: str = "drop"
    duplicate_attribute_policy: str = "last_wins"
    backslash_escapes: bool = False

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: normalise once, here
        set_(self, "recognized_tags", _frozen_names(self.recognized_tags))
        _choice("unknown_mode", self.unknown_mode, UNKNOWN_MODES)
        _choice("stray_end_tag_policy", self.stray_end_tag_policy, STRAY_END_TAG_POLICIES)
        _choice(
            "duplicate_attribute_policy",
            self.duplicate_attribute_policy,
            DUPLICATE_ATTRIBUTE_POLICIES,
        )
        for key in (
            "autoclose_on_any_tag",
            "trim_punctuation",
            "case_sensitive_tags",
            "backslash_escapes",
        ):
            _flag(key, getattr(self, key))
        set_(
            self,
            "per_tag_recovery_strategy",
            _strategy_map(
                "per_tag_recovery_strategy",
                self.per_tag_recovery_strategy,
                DEFAULT_RECOVERY_STRATEGY,
                RECOVERY_STRATEGIES,
            ),
        )
        set_(
            self,
            "self_closing_strategy",
            _strategy_map(
                "self_closing_strategy",
                self.self_closing_strategy,
                DEFAULT_SELF_CLOSING_STRATEGY,
                SELF_CLOSING_STRATEGIES,
            ),
        )

    def recovery_strategy(self, tag: str) -> str:
        """The strategy that picks the span of ``tag`` when it is left unclosed."""
        table = self.per_tag_recovery_strategy
        return table.get(tag, table["*"])

    def self_closing(self, tag: str) -> str:
        """What a self-closing ``<tag/>`` annotates (``marker`` by default)."""
        table = self.self_closing_strategy
        return table.get(tag, table["*"])


CONFIG_KEYS = tuple(f.name for f in fields(KindaXMLConfig))


def build_config(config: KindaXMLConfig | None, overrides: Mapping[str, Any]) -> KindaXMLConfig:
    """Combine an optional config object with keyword overrides, rejecting unknown keys."""
    unknown = sorted(set(overrides) - set(CONFIG_KEYS))
    if unknown:
        raise TypeError(
            f"unknown KindaXML option(s): {', '.join(unknown)}; valid: {', '.join(CONFIG_KEYS)}"
        )
    if config is None:
        return KindaXMLConfig(**overrides)
    if not isinstance(config, KindaXMLConfig):
        raise TypeError(f"config must be a KindaXMLConfig, not {type(config).__name__}")
    return replace(config, **overrides) if overrides else config
