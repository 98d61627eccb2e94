"""Remediation providers that act outside the process: a script per request, or a webhook.

They implement `dsx.health.decisions.ports.RemediationProvider`; the remediation stage
(`dsx.health.decisions.remediation`) decides when to call one, and the sentinel's composition root
(`dsx.controllers.sentinel_wiring`) builds the one the policy names:

- `ScriptProvider` — bare metal: runs an argument list (never a shell string), placeholders
  `{node}`, `{kind}`, `{request_id}`, `{gpus}`, `{reason}` filled per argument, the request as
  JSON on stdin; exit 0 is success;
- `WebhookProvider` — POSTs the request as JSON with a bearer token; a 2xx answer is success.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from dsx import httpclient
from dsx.errors import BadInputError
from dsx.health.decisions.policy import ProviderKind, ProviderSettings
from dsx.health.decisions.ports import RemediationKind, RemediationProvider, RemediationRequest, RemediationResult
from dsx.health.decisions.remediation import ALL_KINDS, NoProvider


class ScriptProvider:
    """Runs a configured argument list per request (bare metal: IPMI, Redfish, a runbook script)."""

    name = "script"

    def __init__(
        self, command: Sequence[str], *, timeout_seconds: float = 900.0, kinds: frozenset[RemediationKind] = ALL_KINDS
    ) -> None:
        if not command:
            raise BadInputError("script remediation provider: command: expected an argument list")
        self.command = tuple(command)
        self.timeout_seconds = timeout_seconds
        self.kinds = kinds

    def supports(self, kind: RemediationKind) -> bool:
        return kind in self.kinds

    def arguments(self, request: RemediationRequest) -> list[str]:
        """The argument list for one request: placeholders are replaced inside each argument only."""
        fields = {
            "{node}": request.node_name,
            "{kind}": request.kind.value,
            "{request_id}": request.request_id,
            "{gpus}": ",".join(request.gpus),
            "{reason}": request.reason,
        }
        out = []
        for argument in self.command:
            for placeholder, value in fields.items():
                argument = argument.replace(placeholder, value)
            out.append(argument)
        return out

    def remediate(self, request: RemediationRequest) -> RemediationResult:
        argv = self.arguments(request)
        try:
            done = subprocess.run(
                argv,
                input=json.dumps(request.to_dict()).encode(),
                capture_output=True,
                timeout=self.timeout_seconds,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return RemediationResult(False, f"{argv[0]} ran past {self.timeout_seconds:g} s")
        except OSError as exc:
            return RemediationResult(False, f"{argv[0]}: {exc.strerror or exc}")
        if done.returncode != 0:
            lines = done.stderr.decode(errors="replace").strip().splitlines()
            return RemediationResult(
                False, f"{argv[0]} exited {done.returncode}: {lines[-1] if lines else 'no output'}"
            )
        lines = done.stdout.decode(errors="replace").strip().splitlines()
        return RemediationResult(True, lines[-1] if lines else f"{argv[0]} succeeded")


class WebhookProvider:
    """POSTs each request as JSON to a URL; the receiver deduplicates on `request_id`."""

    name = "webhook"

    def __init__(
        self,
        url: str,
        *,
        token: str = "",
        timeout_seconds: float = 900.0,
        kinds: frozenset[RemediationKind] = ALL_KINDS,
    ) -> None:
        self.url, self.token, self.timeout_seconds, self.kinds = url, token, timeout_seconds, kinds

    def supports(self, kind: RemediationKind) -> bool:
        return kind in self.kinds

    def remediate(self, request: RemediationRequest) -> RemediationResult:
        headers = {"Idempotency-Key": request.request_id}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            response = httpclient.request(
                "POST",
                self.url,
                json_body=request.to_dict(),
                headers=headers,
                timeout_seconds=self.timeout_seconds,
                max_bytes=65536,
            )
        except httpclient.TransportError as exc:
            return RemediationResult(False, str(exc))
        if not response.ok:
            return RemediationResult(False, f"{self.url} answered {response.status}")
        text = response.text()
        try:
            answer = json.loads(text) if text.strip() else {}
        except ValueError:
            answer = {}
        if isinstance(answer, Mapping) and answer.get("succeeded") is False:
            return RemediationResult(False, str(answer.get("message", "the webhook reported failure")))
        message = answer.get("message") if isinstance(answer, Mapping) else None
        return RemediationResult(True, str(message or f"{self.url} accepted the request"))


def build_provider(settings: ProviderSettings) -> RemediationProvider:
    """The provider for a real cluster's policy (`sim` is the simulator's own, built by the composition root)."""
    if settings.kind is ProviderKind.SIM:
        raise BadInputError("remediation.provider.kind: sim drives simulated nodes; it is built with the simulator")
    if settings.kind is ProviderKind.SCRIPT:
        return ScriptProvider(settings.command, timeout_seconds=settings.timeout_seconds)
    if settings.kind is ProviderKind.WEBHOOK:
        token = ""
        if settings.token_file:
            try:
                token = Path(settings.token_file).read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise BadInputError(f"{settings.token_file}: cannot read the webhook token: {exc.strerror}") from exc
        return WebhookProvider(settings.url, token=token, timeout_seconds=settings.timeout_seconds)
    return NoProvider()
