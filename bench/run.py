"""Run every benchmark in bench/ (files named bench_*.py, each with a `main()`).

`make bench` calls this; `python bench/run.py recipes bundles` runs a subset. Arguments that start
with `-` go to every selected benchmark whose `main` takes an argument list
(`python bench/run.py scale --quick`). Benchmarks print medians and ratios with the command that
produced them; they are never part of `make test`.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    selected = {a for a in argv if not a.startswith("-")}
    extra = [a for a in argv if a.startswith("-")]
    for path in sorted(HERE.glob("bench_*.py")):
        name = path.stem.removeprefix("bench_")
        if selected and name not in selected:
            continue
        spec = importlib.util.spec_from_file_location(path.stem, path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        print(f"== {name} ({path.relative_to(HERE.parent)})", flush=True)
        if inspect.signature(module.main).parameters:
            module.main(extra)
        elif extra:
            raise SystemExit(f"bench/{path.name} takes no arguments; got {' '.join(extra)}")
        else:
            module.main()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
