"""How many CPUs processes other than this bench and its children kept busy
while it measured: all busy CPU time in /proc/stat (every CPU) minus the CPU
time of this process and its reaped children, over the wall time.

A load average cannot tell: one taken after a run counts the bench's own
server. Standard library only."""

import os
import time


def busy_cpu_s():
    """CPU seconds every process has used so far (user to steal, not idle or iowait)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def own_cpu_s():
    """CPU seconds of this process and of the children it has waited for."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class OtherLoad:
    """`with OtherLoad() as load: ...` then `load.cpus`: the CPUs others kept
    busy on average during the block. Children started in the block must be
    waited for inside it, or their time counts as others'."""

    def __enter__(self):
        self.busy0, self.own0, self.t0 = busy_cpu_s(), own_cpu_s(), time.monotonic()
        self.cpus = 0.0
        return self

    def __exit__(self, *exc):
        wall = time.monotonic() - self.t0
        others = (busy_cpu_s() - self.busy0) - (own_cpu_s() - self.own0)
        self.cpus = max(0.0, others) / wall if wall > 0 else 0.0
        return False
