"""Model text made safe for C: identifiers, string literals and comments.

Names come from a downloaded file; nothing of them reaches the C source except
through these functions.
"""
import re

_IDENT_BAD = re.compile(r"[^A-Za-z0-9_]")
_COMMENT_OK = re.compile(r"[A-Za-z0-9_.:,()\[\] -]")
_LITERAL_OK = re.compile(r"[A-Za-z0-9_.:,()\[\] -]")


def identifier(text, prefix="v"):
    """A C identifier made of text's safe characters (never a keyword: always prefixed
    when it could clash)."""
    s = _IDENT_BAD.sub("_", text)
    if not s or s[0].isdigit() or not s[0].isalpha():
        s = f"{prefix}_{s}"
    return s


class Namer:
    """Gives each distinct text a distinct identifier, however they sanitize."""

    def __init__(self, prefix="v"):
        self.prefix = prefix
        self.taken = {}
        self.used = set()

    def __call__(self, text):
        if text in self.taken:
            return self.taken[text]
        self.taken[text] = self.fresh(text)
        return self.taken[text]

    def fresh(self, text):
        """A new identifier even for a text named before (a graph output listed twice)."""
        base = identifier(text, self.prefix)
        name, k = base, 1
        while name in self.used:
            k += 1
            name = f"{base}_{k}"
        self.used.add(name)
        return name


def comment(text, limit=80):
    """Text for inside /* */: safe characters kept, everything else as '_'."""
    s = "".join(c if _COMMENT_OK.fullmatch(c) else "_" for c in text)
    return s if len(s) <= limit else s[:limit - 3] + "..."


def string_literal(text):
    """A C string literal holding text's UTF-8 bytes exactly (octal escapes; no '?' so
    no trigraph can form)."""
    out = []
    for b in text.encode("utf-8"):
        c = chr(b)
        out.append(c if b < 128 and _LITERAL_OK.fullmatch(c) else f"\\{b:03o}")
    return '"' + "".join(out) + '"'
