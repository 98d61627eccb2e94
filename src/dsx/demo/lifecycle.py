"""The demo's steps, configure → certify → operate, each calling the real package in-process.

Configure: resolve the recipe, render the Argo CD bundle, sign it with a throwaway key and
verify it offline. Certify: start `dsx sim` with 8 H100 nodes, lay down what an installation of
the recipe leaves behind (see install.py), start the sentinel (operate.py; validation judges
the installed dsx-sentinel by the Lease it holds), validate readiness, deployment and
conformance, and certify the nodes with the local executor (real gloo collectives, one process per rank, the
ranks named after the simulated nodes) while one node is made slow; the node fault isolation
blames is cordoned and tainted with the reason. Operate: see operate.py.

Each step checks its own outcome (the slow node is the one isolated, the bundle verifies…),
so the demo passes only when every piece did what it should.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import shutil
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dsx import __version__, interrupts, serialization
from dsx import file_tree as tree
from dsx.bundles import render
from dsx.bundles.options import BundleOptions, Deployer
from dsx.certify import engine
from dsx.certify import reports as certify_reports
from dsx.demo import install, journal, operate
from dsx.executors.local import executor as local_executor
from dsx.files import documents
from dsx.files import signing as signing_files
from dsx.kube.client import KubeClient, Taint
from dsx.model import certification as certification_model
from dsx.model import recipe as recipe_model
from dsx.recipes import inputs, resolve
from dsx.signing import keys
from dsx.signing.signer import Algorithm
from dsx.signing.verdict import TrustLevel
from dsx.sim import nodes as sim_nodes
from dsx.sim.cluster import SimCluster
from dsx.validation import attestation, cluster_snapshot, reports, results
from dsx.validation import run as validation_run

CRITERIA = {"service": "eks", "accelerator": "h100", "os": "ubuntu", "intent": "training", "platform": "kubeflow"}
NODE_COUNT = 8
GENERATOR = f"dsx/{__version__} demo"
VALIDATOR = "dsx demo"
DEFAULT_CLUSTER = "dsx-demo"
DEFAULT_SLOW_NODE = "gpu-node-05"
DEFAULT_XID_NODE = "gpu-node-02"
FALLBACK_CATEGORIES = ("nccl-all-reduce",)
"""Certified when the recipe names no categories (the certify engine's own default)."""

INSTALL_TIMEOUT_SECONDS = 120.0
CERTIFY_RUN_TIMEOUT_SECONDS = 120.0
"""A local run of the default sweep takes seconds; two minutes means something is wrong."""
CERTIFY_STALL_TIMEOUT_SECONDS = 12.0
"""Local ranks print a row every few hundred ms; 12 s of silence is a hang, even on a busy box."""

_SIM_STAMP = re.compile(r"^\[\s*[0-9.]+s\] ")
"""`dsx sim` stamps its own progress lines; the journal stamps them again."""

ISOLATION_TAINT = "certify.dsx.run/failed"
ISOLATION_REASON_ANNOTATION = "certify.dsx.run/reason"
ISOLATION_REPORT_ANNOTATION = "certify.dsx.run/report"


class Artifact:
    """Paths under the output folder, relative, so the HTML report links them wherever it is copied."""

    RECIPE = "recipe.yaml"
    RECIPE_ATTESTATION = "recipe.yaml.sigstore.json"
    BUNDLE = "bundle"
    BUNDLE_README = "bundle/README.md"
    BUNDLE_ATTESTATION = "bundle/attestation/bundle.sigstore.json"
    PUBLIC_KEY = "keys/demo.pub"
    KEY_PREFIX = "keys/demo"
    VALIDATION = "validation/report.json"
    VALIDATION_JUNIT = "validation/report.xml"
    CERTIFICATION = "certification/report.json"
    CERTIFICATION_HTML = "certification/report.html"
    SIM_LOGS = "sim-logs"
    TIMELINE = "timeline.json"
    SUMMARY = "summary.json"
    REPORT = "report.html"


@dataclass(frozen=True)
class DemoOptions:
    output_dir: Path
    cluster_name: str = DEFAULT_CLUSTER
    keep: bool = False
    """Leave the simulated cluster running at the end (`dsx sim down --name …` stops it)."""
    slow_node: str = DEFAULT_SLOW_NODE
    xid_node: str = DEFAULT_XID_NODE
    categories: tuple[str, ...] = ()
    """Empty: the recipe's certification categories (eks/h100: nccl-loopback, nccl-all-reduce, training)."""


@dataclass
class Outcome:
    """What the summary reports besides the step records."""

    isolated: list[dict[str, Any]] = field(default_factory=list)
    remediated: list[dict[str, Any]] = field(default_factory=list)
    artifacts: dict[str, Path] = field(default_factory=dict)
    cluster: dict[str, Any] = field(default_factory=dict)


def check_options(options: DemoOptions) -> None:
    """Bad input fails before anything starts: node names must exist, and the two faults differ."""
    from dsx import errors

    names = node_names()
    for flag, value in (("--slow-node", options.slow_node), ("--xid-node", options.xid_node)):
        if value not in names:
            raise errors.BadInputError(errors.allowed_values_message("dsx demo", flag.lstrip("-"), value, names))
    if options.slow_node == options.xid_node:
        raise errors.BadInputError(
            f"dsx demo: --slow-node and --xid-node are both {options.slow_node}; pick two different nodes"
        )
    from dsx.model import certify_catalog as catalog

    for name in options.categories:
        try:
            catalog.get(name)
        except errors.NotFoundError as exc:  # a flag value, so bad input rather than a missing object
            raise errors.BadInputError(f"dsx demo: --{exc}") from exc


def node_names() -> list[str]:
    return [n.name for n in sim_nodes.layout(_sim_options())]


def _sim_options() -> sim_nodes.SimOptions:
    return sim_nodes.SimOptions(
        nodes=NODE_COUNT, accelerator=CRITERIA["accelerator"], service=CRITERIA["service"], os=CRITERIA["os"]
    ).resolved()


class Demo:
    """One run of the demo. `run()` always cleans up; it returns the outcome for the summary."""

    def __init__(self, options: DemoOptions, log: journal.Journal) -> None:
        self.options = options
        self.log = log
        self.out = options.output_dir.resolve()
        self.outcome = Outcome()
        self.recipe: recipe_model.Recipe | None = None
        self.signer: keys.KeySigner | None = None
        self.cluster = SimCluster(options.cluster_name)
        self.kube: KubeClient | None = None

    def path(self, relative: str) -> Path:
        return self.out / relative

    def artifact(self, role: str, relative: str) -> None:
        self.outcome.artifacts[role] = self.path(relative)

    # ---- the run ------------------------------------------------------------------------------

    def run(self) -> Outcome:
        self._prepare_output()
        self.outcome.cluster = {"name": self.options.cluster_name, "kept": self.options.keep}
        with contextlib.ExitStack() as stack:
            stack.callback(self._clean_up)
            self._configure()
            steps = operate.Steps(self)
            self._certify(steps, stack)
            steps.run()
        return self.outcome

    def _prepare_output(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        for stale in ("keys", Artifact.BUNDLE, "validation", "certification", Artifact.SIM_LOGS):
            shutil.rmtree(self.out / stale, ignore_errors=True)
        for stale_file in (Artifact.RECIPE, Artifact.RECIPE_ATTESTATION, "recipe.yaml.intoto.jsonl"):
            (self.out / stale_file).unlink(missing_ok=True)

    def _configure(self) -> None:
        run_step = self.log.run
        run_step("recipe", "recipe", self._recipe)
        run_step("bundle", "bundle", self._bundle, needs=["recipe"])
        run_step("sign", "sign", self._sign, needs=["bundle"])
        run_step("verify", "verify", self._verify, needs=["sign"])

    def _certify(self, sentinel: operate.Steps, stack: contextlib.ExitStack) -> None:
        run_step = self.log.run
        run_step("cluster", "cluster", self._cluster)
        run_step("install", "install", self._install, needs=["recipe", "cluster"])
        sentinel.start(stack)  # before validate: a running sentinel is what holds the Lease validate checks
        run_step("validate", "validate", self._validate, needs=["install", "sign", "sentinel"])
        run_step("certify", "certify", self._certification, needs=["recipe", "cluster"])
        run_step("isolate", "isolate", self._isolate, needs=["certify"])

    # ---- configure ----------------------------------------------------------------------------

    def _recipe(self) -> str:
        gathered = inputs.gather(dict(CRITERIA, nodes=str(NODE_COUNT)))
        recipe = resolve.resolve(gathered.criteria)
        target = self.path(Artifact.RECIPE)
        target.write_text(serialization.dump_yaml(recipe.to_dict()), encoding="utf-8")
        self.recipe = documents.recipe(str(target))
        self.artifact("recipe", Artifact.RECIPE)
        return (
            f"{recipe.metadata.name}: {len(recipe.component_refs)} components, "
            f"digest {recipe.metadata.digest[:19]}… → {Artifact.RECIPE}"
        )

    def _bundle(self) -> str:
        assert self.recipe is not None
        files = render.render(self.recipe, Deployer.ARGOCD, BundleOptions())
        tree.write_tree(files, self.path(Artifact.BUNDLE))
        self.artifact("bundle", Artifact.BUNDLE)
        applications = sum(1 for p in files.files if p.endswith("application.yaml"))
        return f"Argo CD app-of-apps, {len(files.files)} files ({applications} Applications) → {Artifact.BUNDLE}/"

    def _sign(self) -> str:
        paths = signing_files.write_key_pair(self.path(Artifact.KEY_PREFIX), Algorithm.ECDSA_P256)
        self.signer = signing_files.load_signer(paths.private)
        written = signing_files.sign_bundle_directory(self.path(Artifact.BUNDLE), self.signer)
        written += signing_files.sign_file(self.path(Artifact.RECIPE), self.signer)
        self.artifact("publicKey", Artifact.PUBLIC_KEY)
        self.artifact("bundleAttestation", Artifact.BUNDLE_ATTESTATION)
        self.artifact("recipeAttestation", Artifact.RECIPE_ATTESTATION)
        key = self.signer.key_id[:16]
        return f"throwaway ECDSA P-256 key {key}… signed the bundle and the recipe ({len(written)} files)"

    def _verify(self) -> str:
        trusted = [signing_files.load_public_key(self.path(Artifact.PUBLIC_KEY))]
        checked = []
        for relative in (Artifact.BUNDLE, Artifact.RECIPE):
            verdict = signing_files.verify_path(self.path(relative), trusted)
            if verdict.level is not TrustLevel.VERIFIED:
                findings = "; ".join(str(f) for f in verdict.findings) or ", ".join(verdict.notes)
                raise journal.StepFailedError(f"{relative}: {verdict.level.value}: {findings}")
            checked.append(f"{relative} {verdict.level.value} ({verdict.files_checked} files)")
        return "offline with the public key: " + ", ".join(checked)

    # ---- cluster, installation, validation ------------------------------------------------------

    def _cluster(self) -> str:
        status = self.cluster.status()
        if status.phase.value != "absent":
            self.log.note(f"removing the demo's earlier cluster {self.options.cluster_name!r} to start clean")
            self.cluster.down()
        self.cluster.up(
            _sim_options(),
            progress=lambda message: self.log.note(_SIM_STAMP.sub("", message), source="sim"),
            die_with_parent=not self.options.keep,
        )
        self.kube = KubeClient(self.cluster.kubeconfig)
        ready = self.cluster.status()
        self.outcome.cluster.update(
            kubeconfig=str(self.cluster.kubeconfig),
            kubernetesVersion=ready.kubernetes_version,
            nodes=list(ready.node_names),
        )
        return (
            f"dsx sim {self.options.cluster_name!r}: Kubernetes {ready.kubernetes_version}, "
            f"{ready.nodes_ready}/{NODE_COUNT} H100 nodes Ready (kwok), 8 GPUs each"
        )

    def _install(self) -> str:
        assert self.recipe is not None and self.kube is not None
        planned = install.plan(self.recipe)
        install.apply(self.kube, planned)
        install.wait_healthy(self.recipe, self.kube, timeout_seconds=INSTALL_TIMEOUT_SECONDS)
        self.log.note(
            f"simulated installation: {planned.releases} Helm release records, {planned.workloads} workloads, "
            f"{len(planned.crds)} CRDs (pods run by kwok; no real containers)"
        )
        return (
            f"{planned.releases} Helm releases and {planned.workloads} workloads laid down as an installation "
            f"leaves them (simulated: kwok runs the pods), plus {install.WORKLOAD_NAMESPACE}/{install.WORKLOAD_NAME} "
            f"on every node"
        )

    def _validate(self) -> str:
        assert self.recipe is not None and self.kube is not None and self.signer is not None
        captured_at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")  # the Lease is judged at this time
        snap = cluster_snapshot.collect(self.kube, generator=GENERATOR, captured_at=captured_at)
        phases = [results.Phase.READINESS, results.Phase.DEPLOYMENT, results.Phase.CONFORMANCE]
        report = validation_run.validate(self.recipe, snap, phases=phases, reader=self.kube, generator=GENERATOR)
        report_file = self.path(Artifact.VALIDATION)
        report_file.parent.mkdir(parents=True, exist_ok=True)
        report_file.write_text(reports.ctrf_json(report), encoding="utf-8")
        self.path(Artifact.VALIDATION_JUNIT).write_text(reports.junit_xml(report), encoding="utf-8")
        snapshot_file = report_file.with_name("report.snapshot.yaml")
        snapshot_file.write_text(serialization.dump_yaml(snap.to_dict()), encoding="utf-8")
        recipe_copy = report_file.with_name("report.recipe.yaml")
        shutil.copyfile(self.path(Artifact.RECIPE), recipe_copy)
        subjects = {"recipe": recipe_copy, "snapshot": snapshot_file, "report": report_file}
        claims = attestation.predicate(report, snap, validator=VALIDATOR, key_id=self.signer.key_id)
        sidecars = signing_files.attest_beside(report_file, subjects, attestation.PREDICATE_TYPE, claims, self.signer)
        for sidecar, text in sidecars.items():
            sidecar.write_text(text, encoding="utf-8")
        self.artifact("validationReport", Artifact.VALIDATION)
        self.outcome.artifacts["validationAttestation"] = next(iter(sidecars))
        counts = []
        for phase in phases:
            in_phase = [r for r in report.results if r.phase is phase]
            good = sum(1 for r in in_phase if r.status is results.Status.PASSED)
            counts.append(f"{phase.value} {good}/{len(in_phase)}")
        for check in report.results:
            if check.status is not results.Status.PASSED:
                self.log.note(f"{check.name}: {check.status.value}: {check.message}", source="validate")
        if report.failed:
            failed = [r.name for r in report.results if r.status is results.Status.FAILED]
            raise journal.StepFailedError(f"{', '.join(counts)} passed; failed: {', '.join(failed)}")
        return f"{', '.join(counts)} checks passed; attested with the demo key"

    # ---- certification ---------------------------------------------------------------------------

    def certification_spec(self, categories: tuple[str, ...], names: list[str]) -> certification_model.Certification:
        """The recipe's certification block (narrowed to `categories` when given) on `names`, local timeouts."""
        assert self.recipe is not None
        spec = certification_model.Certification.from_dict(
            self.recipe.certification or {}, source=f"{Artifact.RECIPE}: certification"
        )
        requested = {c.name: c for c in spec.categories}
        wanted = categories or tuple(requested) or FALLBACK_CATEGORIES
        chosen = tuple(requested.get(n, certification_model.CategoryRequest(n)) for n in wanted)
        return dataclasses.replace(
            spec,
            categories=chosen,
            target=certification_model.Target(node_names=tuple(names), node_count=len(names)),
            timeouts=certification_model.Timeouts(CERTIFY_RUN_TIMEOUT_SECONDS, CERTIFY_STALL_TIMEOUT_SECONDS),
        )

    def _certification(self) -> str:
        names = node_names()
        slow = certification_model.FaultInjection(self.options.slow_node, certification_model.FaultKind.SLOW)
        spec = dataclasses.replace(self.certification_spec(self.options.categories, names), injections=(slow,))
        self.log.note(
            f"local executor: {NODE_COUNT} nodes × 1 rank, real gloo collectives; "
            f"{self.options.slow_node} made slow (its links at 1/{local_executor.SLOW_FACTOR:.0f} speed)",
            source="certify",
        )

        def progress(event: engine.Event) -> None:
            self.log.note(f"[{event.category}] {event.message}", source="certify")

        started_at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        with local_executor.LocalExecutor(len(names), names=names, injections=(slow,)) as executor:
            result = engine.certify(spec, executor, progress=progress)
        cluster = f"dsx sim {self.options.cluster_name!r} nodes, local executor"
        document = certify_reports.document(result, started_at=started_at, cluster=cluster)
        report_file = self.path(Artifact.CERTIFICATION)
        report_file.parent.mkdir(parents=True, exist_ok=True)
        report_file.write_text(certify_reports.to_json(document), encoding="utf-8")
        self.path(Artifact.CERTIFICATION_HTML).write_text(certify_reports.html(document), encoding="utf-8")
        self.artifact("certificationReport", Artifact.CERTIFICATION)
        self.artifact("certificationHtml", Artifact.CERTIFICATION_HTML)
        for name in result.failed_nodes:
            failure = result.node_verdicts[name].failure
            self.outcome.isolated.append(
                {
                    "node": name,
                    "reason": failure.reason.value if failure else "",
                    "message": failure.message if failure else "",
                    "category": _failed_category(result, name),
                }
            )
        isolated = [entry["node"] for entry in self.outcome.isolated]
        summary = (
            f"{', '.join(c.name for c in spec.categories)} on {len(result.nodes)} nodes: {result.result.value}, "
            f"{result.runs} workload runs in {result.duration_seconds:.0f} s; fault isolation blamed "
            f"{', '.join(isolated) or 'nothing'}"
        )
        if isolated != [self.options.slow_node]:
            raise journal.StepFailedError(f"{summary}; expected exactly {self.options.slow_node} (the slow node)")
        reason = self.outcome.isolated[0]["reason"]
        if reason != certification_model.Reason.THRESHOLD_VIOLATION.value:
            raise journal.StepFailedError(f"{summary}; expected reason ThresholdViolation, got {reason}")
        return f"{summary} ({reason}: {self.outcome.isolated[0]['message']})"

    def _isolate(self) -> str:
        """Hold each isolated node out of service with its reason, as an operator would."""
        assert self.kube is not None
        done = []
        for entry in self.outcome.isolated:
            node = entry["node"]
            self.kube.cordon(node)
            self.kube.taint(node, Taint(ISOLATION_TAINT, "NoSchedule", entry["reason"]))
            self.kube.annotate_node(
                node,
                {ISOLATION_REASON_ANNOTATION: entry["message"], ISOLATION_REPORT_ANNOTATION: Artifact.CERTIFICATION},
            )
            self.log.note(f"{node} cordoned, tainted {ISOLATION_TAINT}={entry['reason']}:NoSchedule", node=node)
            done.append(node)
        return f"{', '.join(done)} cordoned and tainted {ISOLATION_TAINT}=<reason>, reason annotated"

    # ---- cleanup -------------------------------------------------------------------------------

    def _clean_up(self) -> None:
        if self.kube is not None:
            self.kube.close()
            self.kube = None
        self._keep_sim_logs()
        if self.options.keep:
            self.log.run(
                "cleanup",
                "cleanup",
                lambda: (
                    f"kept cluster {self.options.cluster_name!r}: export KUBECONFIG={self.cluster.kubeconfig}; "
                    f"stop it with `dsx sim down --name {self.options.cluster_name}`"
                ),
            )
            return
        self.log.run("cleanup", "cleanup", self._down)

    def _keep_sim_logs(self) -> None:
        """Copy the control plane's component logs into the output folder: `sim down` removes its state."""
        logs = self.cluster.state_dir / "logs"
        if not logs.is_dir():
            return
        target = self.path(Artifact.SIM_LOGS)
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(logs, target)
        self.artifact("simLogs", Artifact.SIM_LOGS)
        self.log.note(f"control-plane logs kept in {Artifact.SIM_LOGS}/", show=False)

    def _down(self) -> str:
        stopped = self.cluster.down()
        leftovers = [c for c, _, alive in self.cluster.status().components if alive]
        if leftovers:
            raise journal.StepFailedError(f"still running after sim down: {', '.join(leftovers)}")
        return f"sim down: stopped {len(stopped)} control-plane processes, state removed"


def _failed_category(result: engine.CertificationResult, node: str) -> str:
    for category in result.categories:
        verdict = category.node_verdicts.get(node)
        if verdict is not None and verdict.status is certification_model.Status.FAILED:
            return category.name
    return ""


def run(options: DemoOptions, say: Any) -> dict[str, Any]:
    """Run the demo and write timeline.json, summary.json and report.html; returns the summary.

    The reports are written even when the run is interrupted (then the interrupt propagates).
    """
    from dsx.demo import report

    check_options(options)
    log = journal.Journal(say)
    demo = Demo(options, log)
    try:
        with interrupts.sigterm_as_keyboard_interrupt():
            demo.run()
    except KeyboardInterrupt:
        log.interrupted = True
        raise
    finally:
        outcome = demo.outcome
        for role, relative in (
            ("timeline", Artifact.TIMELINE),
            ("summary", Artifact.SUMMARY),
            ("report", Artifact.REPORT),
        ):
            demo.artifact(role, relative)
        document = report.summary(
            log,
            isolated=outcome.isolated,
            remediated=outcome.remediated,
            artifacts=outcome.artifacts,
            cluster=outcome.cluster,
        )
        events = report.timeline(log)
        demo.path(Artifact.TIMELINE).write_text(report.to_json(events), encoding="utf-8")
        demo.path(Artifact.SUMMARY).write_text(report.to_json(document), encoding="utf-8")
        demo.path(Artifact.REPORT).write_text(
            report.html_page(document, events["events"], base=demo.out), encoding="utf-8"
        )
    return document
