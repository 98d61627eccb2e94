"""Where chart data comes from: the sources behind the `ChartSource` port (`dsx.lint.ports`).

Lookup order (`default_source`): `--charts DIR`, the user's chart cache, the charts packaged
in the dsx catalog, then the chart's own repository when online (which fills the cache). Each
source either returns `ChartData` or raises `ChartUnavailable` with a reason; the chain joins
the reasons so a `not linted` line says everywhere it looked.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from dsx import catalog
from dsx.charts import directory as chart_directory
from dsx.lint import chart as chart_data
from dsx.lint.ports import ChartSource, ChartUnavailable, chart_name
from dsx.model.recipe import ComponentRef
from dsx.settings import folders


def version_spellings(version: str) -> list[str]:
    """The pinned version first, then the same version with the `v` prefix toggled (25.1.0 ↔ v25.1.0)."""
    other = version[1:] if version.startswith("v") else f"v{version}"
    return [version, other]


class DirectorySource:
    """Charts laid out as `<root>/<chart>/<version>/` (the dsx cache layout or unpacked charts).

    With `parsed_dir`, what a chart directory reads into is also kept there
    (`dsx.charts.directory.load`), so the next process skips parsing it.
    """

    def __init__(self, root: Path, label: str, *, show_root: bool = True, parsed_dir: Path | None = None) -> None:
        self.root = root
        self.label = label
        self.show_root = show_root
        self.parsed_dir = parsed_dir
        self._loaded: dict[tuple[Path, str], chart_data.ChartData] = {}

    def chart_for(self, component: ComponentRef) -> chart_data.ChartData:
        name = chart_name(component)
        for version in version_spellings(component.version):
            directory = self.root / name / version
            key = (directory, component.version)
            if key in self._loaded:
                return self._loaded[key]
            if (directory / chart_data.VALUES_FILE).is_file():
                loaded = self._read(directory, name, component.version, f"{self.label} {name}/{version}")
                self._loaded[key] = loaded
                return loaded
        looked = f"not in {self.label} ({self.root})" if self.show_root else f"not in {self.label}"
        raise ChartUnavailable(f"{_no_data(component)}: {looked}", looked=looked)

    def _read(self, directory: Path, name: str, version: str, origin: str) -> chart_data.ChartData:
        return chart_directory.load(directory, name=name, version=version, origin=origin, parsed_dir=self.parsed_dir)


def offline_reason(source: ChartSource) -> str | None:
    """Why a chain's repository fetch found no network (said once by `dsx lint`), None if it did not."""
    for member in getattr(source, "chain", (source,)):
        reason = getattr(member, "offline", None)
        if isinstance(reason, str):
            return reason
    return None


class ChainSource:
    """The first source that has the chart wins; when none has it, every reason is kept."""

    def __init__(self, chain: Sequence[ChartSource]) -> None:
        self.chain = tuple(chain)

    def chart_for(self, component: ComponentRef) -> chart_data.ChartData:
        reasons: list[str] = []
        for source in self.chain:
            try:
                return source.chart_for(component)
            except ChartUnavailable as exc:
                reasons.append(exc.looked)
        raise ChartUnavailable(f"{_no_data(component)}: {'; '.join(reasons) or 'no chart source configured'}")


def _no_data(component: ComponentRef) -> str:
    return f"no chart data for {chart_name(component)} {component.version}"


def packaged_charts() -> Path:
    """The chart data shipped inside dsx (upstream defaults and the paths their templates read)."""
    return catalog.path("charts")


def default_source(
    charts_dir: Path | None = None, *, offline: bool = False, paths: folders.PathSettings | None = None
) -> ChartSource:
    """The standard lookup chain; `offline` leaves out the repository fetch. `paths` (the entry
    point's, by default) says where the chart cache is and where parsed chart data is kept."""
    where = paths if paths is not None else folders.paths()
    cache, parsed = where.chart_cache, where.parsed_chart_cache
    chain: list[ChartSource] = []
    if charts_dir is not None:
        chain.append(DirectorySource(charts_dir, "--charts", parsed_dir=parsed))
    chain += [
        DirectorySource(cache, "chart cache", parsed_dir=parsed),
        DirectorySource(packaged_charts(), "dsx catalog", show_root=False, parsed_dir=parsed),
    ]
    if offline:
        chain.append(_Offline())
    else:
        from dsx.charts import fetch

        chain.append(fetch.RepositoryFetcher(cache))
    return ChainSource(chain)


__all__ = [
    "ChainSource",
    "ChartSource",
    "ChartUnavailable",
    "DirectorySource",
    "chart_name",
    "default_source",
    "offline_reason",
    "packaged_charts",
    "version_spellings",
]


class _Offline:
    def chart_for(self, component: ComponentRef) -> chart_data.ChartData:
        looked = f"not fetched from {component.source or 'its repository'} (offline)"
        raise ChartUnavailable(f"{_no_data(component)}: {looked}", looked=looked)
