#!/usr/bin/env python3
# Provenance: a verbatim copy of the issues' reference ceiling (the shared tools folder of the HeteroFlow issue
# tracker, tools/bind_ceiling.py, 2026-12): issue 47 divides benchmark throughput by what this prints, measured in the
# same run. Kept here so a clone can take the same measurement (docs/scheduler-performance.md).
"""The physical reference for scheduler throughput on this machine: how many bind-shaped transactions one
PostgreSQL connection commits per second (CAS claim of a task row + node ledger += + one event row, one CTE round trip,
synchronous_commit off as the project uses). Run with the project's venv python; DATABASE_URL of a scratch DB."""
import os, sys, time
import psycopg
url = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
n = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
with psycopg.connect(url, autocommit=True) as c:
    c.execute("drop table if exists ceil_task, ceil_node, ceil_event")
    c.execute("create table ceil_node(id int primary key, gpu_used int not null default 0)")
    c.execute("create table ceil_task(id int primary key, state text not null, node_id int)")
    c.execute("create table ceil_event(id bigserial primary key, task_id int, at timestamptz default now())")
    c.execute("insert into ceil_node select g from generate_series(1,300) g")
    c.execute("insert into ceil_task select g, 'pending' from generate_series(1,%s) g", (n,))
    c.autocommit = False
    t = time.perf_counter()
    for i in range(1, n + 1):
        c.execute("set local synchronous_commit = off")
        c.execute("""with t as (update ceil_task set state='scheduled', node_id=%(n)s where id=%(i)s and state='pending' returning id),
                     nd as (update ceil_node set gpu_used=gpu_used+1 where id=%(n)s and exists(select 1 from t) returning id)
                     insert into ceil_event(task_id) select id from t""", {"i": i, "n": i % 300 + 1})
        c.commit()
    dt = time.perf_counter() - t
    c.autocommit = True
    c.execute("drop table ceil_task, ceil_node, ceil_event")
print(f"bind_ceiling_per_s={n/dt:.0f}")
