"""Which runtime headers a generated model includes: only those defining what it uses.

The runtime is ~7,000 lines of inline kernels; a model that runs three operators should
not make the C compiler parse all of them. Each header includes what it needs itself, so
a model includes the headers that define the aotc names in its source, plus the closure
over the names those headers mention (a macro's body may name another header's function
without including it). A name no header is known to define makes the model include the
whole runtime (aotc_runtime.h): never a missing declaration, at worst a slower build.
"""
import functools
import os
import re

from .. import resources

WHOLE_RUNTIME = "aotc_runtime.h"
ALWAYS = ("aotc_base.h", "aotc_threads.h")   # error codes and the pool, in every model

_NAME = re.compile(r"\b(?:aotc|AOTC)_\w*")
_DEFINITIONS = (
    re.compile(r"^\s*#\s*define\s+((?:aotc|AOTC)_\w*)", re.M),                      # macros
    re.compile(r"^AOTC_(?:ENGINE_)?FN\b[^(;={]*?\b((?:aotc|AOTC)_\w*)\s*\(", re.M),  # kernels
    re.compile(r"^static\b[^(;={]*?\b((?:aotc|AOTC)_\w*)\s*(?:\[|=|\()", re.M),     # tables
    re.compile(r"^\s*typedef\b[^;{]*?\b((?:aotc|AOTC)_\w*)\s*;", re.M),              # typedefs
    re.compile(r"^\}\s*((?:aotc|AOTC)_\w*)\s*;", re.M),                              # structs
    re.compile(r"^\s*((?:aotc|AOTC)_\w*)\s*(?:=[^,]*)?,?\s*(?:/[*/].*)?$", re.M),   # enumerators
)
# aotc_foo_##T in a macro makes names aotc_foo_*: its header is taken as defining them
# (the macro may also only use them; the header is then included for nothing)
_PASTED = re.compile(r"\b((?:aotc|AOTC)_\w*?)\s*##")


@functools.lru_cache(maxsize=None)
def _index(runtime_dir):
    """(exact name -> headers defining it, [(prefix, header)], header -> names it mentions,
    names tested by #if: the build's switches, AOTC_EXACT and the like). A pasted name
    in a header, AOTC_LD_##T, is mentioned as its prefix AOTC_LD_."""
    defined, prefixes, mentions, switches = {}, [], {}, set()
    for file in sorted(os.listdir(runtime_dir)):
        if not file.endswith(".h") or file == WHOLE_RUNTIME:
            continue
        with open(os.path.join(runtime_dir, file)) as f:
            text = f.read()
        mentions[file] = frozenset(_NAME.findall(text))
        for pattern in _DEFINITIONS:
            for name in pattern.findall(text):
                defined.setdefault(name, set()).add(file)
        for line in re.findall(r"^\s*#\s*define\b.*$", text, re.M):
            prefixes += [(p, file) for p in _PASTED.findall(line)]
        for line in re.findall(r"^\s*#\s*(?:if|ifdef|ifndef|elif)\b.*$", text, re.M):
            switches.update(_NAME.findall(line))
    return defined, prefixes, mentions, frozenset(switches)


def _definers(name, defined, prefixes):
    """Headers defining `name`: exactly, through a pasting macro (aotc_foo_##T defines
    aotc_foo_f32), or, for a pasted prefix, every name that begins with it."""
    files = set(defined.get(name, ()))
    files |= {file for prefix, file in prefixes if name.startswith(prefix)}
    if not files:
        files = {f for full, where in defined.items() if full.startswith(name) for f in where}
    return files


def headers_for(source, runtime_dir=None):
    """The runtime headers `source` (the model's operator code) needs,
    in a stable order; [WHOLE_RUNTIME] when some aotc name in it is unknown."""
    defined, prefixes, mentions, switches = _index(str(runtime_dir or resources.runtime_dir()))
    needed, pending, seen = set(), set(ALWAYS), set()
    for name in set(_NAME.findall(source)):
        files = _definers(name, defined, prefixes)
        if not files and name not in switches:
            return [WHOLE_RUNTIME]
        pending |= files
    while pending:   # a header's own unknown names are its locals and its comments
        file = pending.pop()
        needed.add(file)
        for name in mentions[file] - seen:
            seen.add(name)
            pending |= _definers(name, defined, prefixes) - needed
    return sorted(needed)
