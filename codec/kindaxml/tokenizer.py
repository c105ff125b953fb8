"""The lexical grammar of KindaXML: tags, CDATA blocks and backslash escapes.

One compiled pattern finds every piece of markup; whatever lies between two pieces is text,
so the regex engine, not Python, walks over text and over each ``<`` that starts no tag.

A tag is ``<`` (or ``</``) and a name, running to the first ``>``. If a ``<`` or a newline
comes before that ``>``, the ``<`` was not a tag and stays text: this bounds every tag to
one line, so a stray ``<`` or an unclosed quote can never swallow the rest of the document
(spec §6.1). A quote inside a tag therefore never hides a ``>``; an open quote simply ends
where the tag does. The name and the attribute text are matched possessively and stop at
the next ``<``, so a failed attempt reads no further than where the next attempt starts and
the pass stays linear in the length of the input.
"""

from __future__ import annotations

import re

from toolcodec.kindaxml.config import TAG_NAME

CDATA_OPEN = "<![CDATA["
CDATA_CLOSE = "]]>"

# ``match.lastindex`` tells the kinds apart: it is the outermost group that matched.
TAG = 1  # groups 2, 3, 4: "/" for an end tag (else ""), the name, the attribute text
CDATA = 5  # a block's opener; see cdata_block for the rest
ESCAPE = 6  # "\<" or "\>" (spec §7.3): the character after the backslash is text

_NAME = TAG_NAME.pattern + "+"  # possessive: the attribute text cannot start mid-name
_TAG_REST = rf"(/?)({_NAME})([^<>\n]*+)>"  # a tag after its "<"
_CDATA_REST = re.escape(CDATA_OPEN[1:])
# Each pattern starts with a literal or a one-class prefix, which the regex engine finds
# with a fast search over the text in between (an alternation of groups is tried at every
# position instead, about 100 times slower on text with no markup).
MARKUP = re.compile(rf"<(?:({_TAG_REST})|({_CDATA_REST}))")
MARKUP_WITH_ESCAPES = re.compile(rf"[<\\](?:(?<=<)(?:({_TAG_REST})|({_CDATA_REST}))|(?<=\\)([<>]))")


def markup_pattern(backslash_escapes: bool) -> re.Pattern[str]:
    """The pattern whose matches are the markup of a document, in order."""
    return MARKUP_WITH_ESCAPES if backslash_escapes else MARKUP


def cdata_block(source: str, opener_end: int) -> tuple[str, int, bool]:
    """Read the CDATA block whose opener ends at ``opener_end``.

    Returns its text (without the delimiters), the input offset just after the block, and
    whether ``]]>`` closed it: an unterminated block runs to the end of the document
    (spec §7.2).
    """
    close = source.find(CDATA_CLOSE, opener_end)
    if close < 0:
        return source[opener_end:], len(source), False
    return source[opener_end:close], close + len(CDATA_CLOSE), True


def self_closing_length(body: str) -> int:
    """Length of a start tag's attribute text without its closing ``/``, or -1 if none.

    ``<name .../>`` is self-closing: its attribute text, right-stripped, ends with ``/``.
    """
    last = body.rstrip()
    return len(last) - 1 if last.endswith("/") else -1
