"""Mutations shared by the input kinds: bytes and text edited the way a fuzzer or an attacker would,
and the ids and names a request must not be allowed with.

>>> import random
>>> len(mutate_bytes(random.Random(1), b"admins: [user:root]\\n")) > 0
True
"""

from __future__ import annotations

import base64
import random

# Look-alikes of ASCII letters (Cyrillic, Greek, fullwidth, dotless i), and characters that
# are invisible or change a string's meaning.
HOMOGLYPHS = {
    "a": "\u0430",
    "e": "\u0435",
    "o": "\u043e",
    "r": "\u0433",
    "c": "\u0441",
    "p": "\u0440",
    "i": "\u0131",
    "s": "\u0455",
    "u": "\u03c5",
    "t": "\u0442",
}
INVISIBLE = ["\u200b", "\u200d", "\ufeff", "\u00a0", "\u2060", "\u202e", "\x00", "\t", "\r", "\n", " "]
# Fragments that mean something to YAML, JSON, the policy language, shells and paths.
FRAGMENTS = [
    "",
    " ",
    "\n",
    "\t",
    ":",
    ": ",
    "- ",
    "[",
    "]",
    "{",
    "}",
    ",",
    "#",
    "&a",
    "*a",
    "<<: *a",
    "!!python/object:os.system",
    "!!binary",
    "? ",
    "|",
    ">",
    "'",
    '"',
    "\\",
    "%",
    "@",
    "~",
    "null",
    "true",
    "yes",
    "no",
    "0",
    "-1",
    "1e400",
    "NaN",
    ".inf",
    "0x10",
    "user:root",
    "user:eve",
    "ADMIN",
    "ALL",
    "READ",
    "namespace:",
    "dataset:sales.",
    "..",
    "../",
    "/dev/zero",
    "{{",
    "$owner",
    ":-",
    "not ",
    "requires",
    "every descendant",
    "if",
    "\u0430",
    "\ufeff",
    "a" * 300,
    "9" * 40,
    "[[[[[[[[[[",
    "{a: " * 20,
]
INTERESTING_BYTES = [b"\x00", b"\xff", b"\xfe\xff", b"\xc3", b"\xed\xa0\x80", b"\xe2\x80\xae", b"\r\n", b"\x1b["]


def mutate_text(rng: random.Random, text: str, edits: int | None = None) -> str:
    """``text`` with a few slices cut, duplicated, swapped or replaced by fragments."""
    for _ in range(edits if edits is not None else rng.randint(1, 4)):
        if not text:
            text = rng.choice(FRAGMENTS)
            continue
        at = rng.randrange(len(text) + 1)
        width = rng.randint(0, min(40, len(text)))
        how = rng.randrange(6)
        if how == 0:
            text = text[:at] + text[at + width :]
        elif how == 1:
            text = text[:at] + rng.choice(FRAGMENTS) + text[at + width * (rng.random() < 0.3) :]
        elif how == 2:
            piece = text[at : at + width]
            text = text[:at] + piece * rng.randint(2, 5) + text[at:]
        elif how == 3:
            other = rng.randrange(len(text) + 1)
            text = text[:at] + text[other : other + width] + text[at + width :]
        elif how == 4:
            text = "".join(HOMOGLYPHS.get(c, c) if rng.random() < 0.2 else c for c in text[at : at + width]).join(
                (text[:at], text[at + width :])
            )
        else:
            text = text[:at] + rng.choice(INVISIBLE) + text[at:]
    return text


def mutate_bytes(rng: random.Random, data: bytes, edits: int | None = None) -> bytes:
    """``data`` with a few bytes flipped, inserted or cut (text that may no longer be UTF-8)."""
    buffer = bytearray(data)
    for _ in range(edits if edits is not None else rng.randint(1, 6)):
        at = rng.randrange(len(buffer) + 1)
        how = rng.randrange(4)
        if how == 0 and at < len(buffer):
            buffer[at] ^= 1 << rng.randrange(8)
        elif how == 1:
            buffer[at:at] = rng.choice(INTERESTING_BYTES)
        elif how == 2:
            del buffer[at : at + rng.randint(1, 16)]
        else:
            buffer[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
    return bytes(buffer)


def encode(data: bytes) -> str:
    """Bytes as text a JSON case can carry."""
    return base64.b64encode(data).decode("ascii")


def decode(text: str) -> bytes:
    return base64.b64decode(text)


def look_alike(rng: random.Random, word: str) -> str:
    """``word`` changed so that a person might read it as ``word``, but it is not ``word``."""
    choices = [
        lambda w: w[:1].upper() + w[1:],
        lambda w: w.upper(),
        lambda w: w + " ",
        lambda w: " " + w,
        lambda w: w + rng.choice(INVISIBLE),
        lambda w: rng.choice(INVISIBLE) + w,
        lambda w: "".join(HOMOGLYPHS.get(c, c) for c in w),
        lambda w: w.replace(":", "\uff1a"),
        lambda w: w.replace(":", "::", 1),
        lambda w: w.replace(":", " : ", 1),
        lambda w: w.replace(".", "..", 1) if "." in w else w + ".",
        lambda w: w + "\x00",
        lambda w: w.replace("l", "1").replace("o", "0") if any(c in w for c in "lo") else w + "0",
    ]
    for _ in range(10):
        out: str = rng.choice(choices)(word)
        if out != word:
            return out
    return word + "\u200b"
