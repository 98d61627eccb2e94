"""Adapters to this machine: kernel-log readers (journald, files), NVML, and the GPU host probes.

Everything that reads a node's own devices and logs lives here, so the domain packages stay
pure: `kernel_log` (file followers, the journald reader and the kernel-log monitor built on
them), `nvml` (the NVML monitor over pynvml) and `snapshot` (`nvidia-smi`, sysfs and the
chroot probes behind `dsx snapshot`). They implement ports of `dsx.health` and `dsx.validation`.
`hostname` is this machine's name for the entry points (a calibration file names its host).
"""

import socket


def hostname() -> str:
    """This machine's name, as the kernel reports it."""
    return socket.gethostname()
