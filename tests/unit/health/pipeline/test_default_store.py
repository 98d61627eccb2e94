"""Area of concern: without --store, each cluster gets its own store (issue 31: one store per machine
mixed the histories of every `dsx sim` cluster), found the way kubectl finds the cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsx.cli.main import main
from dsx.store import open_store


def kubeconfig(folder: Path, server: str) -> Path:
    path = folder / f"kubeconfig-{abs(hash(server))}"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: '{server}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    return path


def dsx(monkeypatch: pytest.MonkeyPatch, environ: dict[str, str], *argv: str) -> int:
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    return int(exited.value.code or 0)


def test_two_clusters_keep_two_histories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = tmp_path / "state"
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    staging = kubeconfig(tmp_path, "https://10.0.0.1:6443")
    production = kubeconfig(tmp_path, "https://api.prod.example:443")
    for cluster in (staging, production):
        code = dsx(monkeypatch, {"DSX_STATE_DIR": str(state), "KUBECONFIG": str(cluster)}, "sentinel", "events")
        assert code == 0
    stores = sorted(p.relative_to(state).as_posix() for p in state.rglob("events.db"))
    assert stores == [
        "sentinel/clusters/10.0.0.1-6443/events.db",
        "sentinel/clusters/api.prod.example-443/events.db",
    ]
    opened = open_store(f"sqlite:///{state / stores[0]}")
    try:
        assert opened.last_sequence() == 0  # a real store, created empty
    finally:
        opened.close()


def test_no_cluster_and_no_store_is_refused_naming_both_ways(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config
    code = dsx(monkeypatch, {"DSX_STATE_DIR": str(tmp_path / "state")}, "sentinel", "events")
    assert code == 2
    said = capsys.readouterr().err
    assert "no --store, and no cluster to find the default store by" in said and "KUBECONFIG" in said
    assert not (tmp_path / "state").exists() or not list((tmp_path / "state").rglob("events.db"))


def test_sentinel_run_names_its_default_store_after_the_cluster_it_acts_on(tmp_path: Path) -> None:
    from dsx.controllers import sentinel_wiring

    config = kubeconfig(tmp_path, "https://10.0.0.1:6443")
    choice = sentinel_wiring.ClusterChoice(kubeconfig=config)
    assert sentinel_wiring.cluster_server(choice) == "https://10.0.0.1:6443"
