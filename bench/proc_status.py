"""This process's memory as the kernel reports it, for the bench scripts' peak-memory columns."""


def status_mib(field):
    """A /proc/self/status field in MiB: VmRSS (resident now) or VmHWM (the resident peak)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"no {field} in /proc/self/status")
