"""This process's memory and the machine's CPU use as the kernel reports them, for the bench scripts
(peak-memory columns, and waiting for an idle machine before a measurement)."""
import time


def status_mib(field):
    """A /proc/self/status field in MiB: VmRSS (resident now) or VmHWM (the resident peak)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"no {field} in /proc/self/status")


def cpu_busy(seconds=0.5):
    """Share of all CPUs busy over `seconds` (from /proc/stat), before a measurement starts."""
    def sample():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v), v[3] + v[4]  # total, idle + iowait
    t0, i0 = sample()
    time.sleep(seconds)
    t1, i1 = sample()
    return round(1.0 - (i1 - i0) / max(t1 - t0, 1), 3)
