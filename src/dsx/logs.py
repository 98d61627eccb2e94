"""The one logging setup of dsx's long-running commands (`dsx serve`, `dsx sentinel run`,
`dsx sentinel monitor`): `--log-format json|text`, stderr, the `dsx` logger tree.

Why one place: a log collector parses every line of a JSON log; one plain-text line from a
command that printed its own banner breaks that. In JSON mode every line is one JSON object
(time, level, logger, message and the record's `extra` fields); text mode is for a terminal.
"""

from __future__ import annotations

import enum
import json
import logging
import sys
import threading
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class LogFormat(enum.StrEnum):
    JSON = "json"
    TEXT = "text"


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and any `extra` fields."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


class _Handler(logging.StreamHandler):  # type: ignore[type-arg]
    """Marks the handler this module installed, so a second call replaces it rather than adding one."""


def configure(log_format: LogFormat | str = LogFormat.JSON, level: int = logging.INFO) -> None:
    """Send the `dsx` loggers to stderr in `log_format`; calling again switches the format."""
    chosen = LogFormat(log_format)
    root = logging.getLogger("dsx")
    for handler in [h for h in root.handlers if isinstance(h, _Handler)]:
        root.removeHandler(handler)
    handler = _Handler(sys.stderr)
    handler.setFormatter(JsonFormatter() if chosen is LogFormat.JSON else logging.Formatter(TEXT_FORMAT))
    root.addHandler(handler)
    root.setLevel(level)
    root.propagate = False
    if chosen is LogFormat.JSON:
        # an exception that escapes a thread or the main program is one JSON line too (its
        # traceback in the `exception` field), never a raw traceback in the middle of the log
        threading.excepthook = _log_thread_exception
        sys.excepthook = _log_uncaught


def json_active() -> bool:
    """Whether this process logs JSON lines: then a fatal error must be one too (dsx.cli.main)."""
    handlers = logging.getLogger("dsx").handlers
    return any(isinstance(h, _Handler) and isinstance(h.formatter, JsonFormatter) for h in handlers)


def reset() -> None:
    """Undo `configure` (each CLI run starts from Python's defaults, also when tests run several in one process)."""
    root = logging.getLogger("dsx")
    ours = [h for h in root.handlers if isinstance(h, _Handler)]
    for handler in ours:
        root.removeHandler(handler)
    if ours:
        root.setLevel(logging.NOTSET)
        root.propagate = True
    threading.excepthook = threading.__excepthook__
    sys.excepthook = sys.__excepthook__


def fatal(error: BaseException, exit_code: int) -> None:
    """The last line of a command that failed, as a JSON record (the CLI prints `dsx: error: …` otherwise)."""
    code = getattr(error, "code", "INTERNAL")
    logging.getLogger("dsx.cli").error("%s", error, extra={"error_code": code, "exit_code": exit_code})


_uncaught = logging.getLogger("dsx.uncaught")


def _log_thread_exception(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit or args.exc_value is None:
        return
    thread = args.thread.name if args.thread is not None else "unknown"
    _uncaught.error(
        "uncaught exception in thread %s",
        thread,
        exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
        extra={"thread_name": thread},
    )


def _log_uncaught(kind: type[BaseException], value: BaseException, trace: TracebackType | None) -> None:
    _uncaught.critical("uncaught exception", exc_info=(kind, value, trace))
