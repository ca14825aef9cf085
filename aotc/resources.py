"""Where the C templates and runtime headers are: beside the package when installed
from a wheel, at the top of the source tree when run from a checkout."""
from pathlib import Path

_HERE = Path(__file__).resolve().parent


def _find(name):
    for candidate in (_HERE / name, _HERE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"aotc installation is missing its {name}/ folder")


def templates_dir():
    return _find("templates")


def runtime_dir():
    return _find("runtime_c")
