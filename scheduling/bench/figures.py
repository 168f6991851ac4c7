"""Small figures the benchmarks print."""

import math
import os
import resource


def percentile(ordered: list[float], percent: float) -> float:
    """The nearest-rank percentile of an ascending list."""
    position = max(math.ceil(len(ordered) * percent / 100) - 1, 0)
    return ordered[position]


def max_rss_mb() -> float:
    """This process's peak resident set size."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def process_cpu_seconds(pid: int) -> float | None:
    """User and system CPU seconds of process `pid` so far (Linux `/proc`); None when it cannot be read (another
    machine's PostgreSQL, another user's process)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rpartition(")")[2].split()
    except OSError:
        return None
    # After the command name: state is field 3, utime and stime are fields 14 and 15 of proc(5).
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rows_read() -> int:
    """Table rows the server has read in the current database so far, by sequential and index scans (PostgreSQL's
    cumulative statistics; a session's counts arrive when it ends)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT coalesce(sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)), 0) "
                       "FROM pg_stat_user_tables")
        return int(cursor.fetchone()[0])
