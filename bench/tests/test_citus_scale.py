"""scripts/bench (z) Citus against plain PostgreSQL 15: registration, options, the counting
of round trips in the nodes' logs, and the figures computed from a run's measurements."""

from __future__ import annotations

import pytest

from bench.citus_nodes import (
    PLAIN_SETTINGS,
    command_shapes,
    cpu_ms_per_op,
    remote_commands,
    without_pids,
)
from bench.citus_scale import OPS, figures_of, scale_figures
from bench.options import FULL, QUICK, parse_args
from bench.scenarios import SCENARIOS

# what `citus.log_remote_commands` leaves in a node's log (log_min_messages = notice)
LOG = """\
19:52:01.101 [9653] NOTICE:  issuing SELECT public.f1('0000-01'::uuid, 1) AS f1
19:52:01.101 [9653] DETAIL:  on server postgres@127.0.0.1:36957 connectionId: 3
19:52:01.102 [9653] NOTICE:  issuing BEGIN;SELECT assign_distributed_transaction_id(0, 51, 'x');
19:52:01.102 [9653] DETAIL:  on server postgres@127.0.0.1:50355 connectionId: 4
19:52:01.103 [9653] NOTICE:  issuing INSERT INTO public.t1_102081 (p, v)
	VALUES ('0000-03'::uuid, 1)
19:52:01.103 [9653] DETAIL:  on server postgres@127.0.0.1:50355 connectionId: 4
19:52:01.104 [9653] NOTICE:  issuing COMMIT PREPARED 'citus_0_9653_51_7'
19:52:01.104 [9653] DETAIL:  on server postgres@127.0.0.1:41000 connectionId: 5
19:52:01.105 [9700] LOG:  checkpoint starting: time
"""


def test_the_scenario_is_registered_on_request_only() -> None:
    assert SCENARIOS["z"].run.__name__ == "citus_scale"
    assert "z" not in parse_args([]).scenarios
    assert parse_args(["--scenarios", "z"]).scenarios == ("z",)
    picked = parse_args(["--scenarios", "z", "--scale-ops", "push1,sql_call"])
    assert picked.sizes.scale_ops == ("push1", "sql_call")
    with pytest.raises(SystemExit):
        parse_args(["--scale-ops", "push2"])
    assert parse_args(["--scale-prefill", "5000"]).sizes.scale_prefill == 5000


def test_sizes_and_figures() -> None:
    assert (FULL.scale_partitions, FULL.scale_single_connections, FULL.scale_consumers) == (8, 8, 4)
    assert QUICK.scale_prefill < FULL.scale_prefill
    keys = [f.key for f in scale_figures(FULL)]
    for op in OPS:
        assert {f"{op}_plain_ms", f"{op}_coord_ms", f"{op}_coord_pct", f"{op}_workers_ms"} <= set(
            keys
        )
    # the round trips of pop + ack are counted per request: the pop's and the ack's
    assert {"pop100_remote", "ack100_remote", "push1_remote", "sql_call_remote"} <= set(keys)
    only = parse_args(["--scale-ops", "popack100"]).sizes
    assert {f.key.split("_")[0] for f in scale_figures(only)} == {"popack100", "pop100", "ack100"}


def test_the_plain_postgres_has_the_nodes_settings_without_citus() -> None:
    assert PLAIN_SETTINGS["fsync"] == "off"
    assert "shared_preload_libraries" not in PLAIN_SETTINGS
    assert not any(k.startswith("citus.") for k in PLAIN_SETTINGS)


def test_round_trips_are_counted_per_destination_node() -> None:
    ports = {36957: "worker1", 50355: "worker2"}
    assert remote_commands(LOG, ports) == {"worker1": 1, "worker2": 2, "port 41000": 1}
    assert remote_commands("", ports) == {}


def test_background_processes_lines_are_left_out() -> None:
    # the maintenance daemon (pid 9700 here) polls for distributed deadlocks on its own
    daemon = (
        "19:52:02.000 [9700] NOTICE:  issuing SELECT waiting_pid FROM x\n"
        "\tWHERE true\n"
        "19:52:02.000 [9700] DETAIL:  on server postgres@127.0.0.1:36957 connectionId: 9\n"
    )
    ports = {36957: "worker1", 50355: "worker2"}
    assert remote_commands(LOG + daemon, ports)["worker1"] == 2
    kept = without_pids(LOG + daemon, {9700})
    assert remote_commands(kept, ports) == remote_commands(LOG, ports)
    assert "waiting_pid" not in kept and "checkpoint starting" not in kept
    assert without_pids(LOG, set()) == LOG


def test_commands_are_counted_by_shape() -> None:
    shapes = command_shapes(LOG + LOG)
    assert shapes["SELECT public.fN('?'::uuid, N) AS fN"] == 2
    assert shapes["INSERT INTO public.tN_N (p, v)"] == 2
    assert shapes["COMMIT PREPARED '?'"] == 2
    assert sum(shapes.values()) == 8


def test_cpu_per_operation() -> None:
    # 50% of one core for 2 s over 1000 ops: 1 ms each
    assert cpu_ms_per_op(50.0, 2.0, 1000) == 1.0
    assert cpu_ms_per_op(None, 2.0, 1000) is None
    assert cpu_ms_per_op(50.0, 2.0, 0) is None


def test_figures_of_a_measured_pair() -> None:
    # 1000 ops in 2 s: plain PostgreSQL 40% of a core (0.8 ms/op), 10% of it idle; the
    # coordinator 10% (0.2 ms/op), 5% of it idle
    plain = {"rate": 500.0, "ops": 1000, "cpu": {"postgres": 40.0, "seconds": 2.0},
             "ms_per_op": {"postgres": 0.8, "server": 0.5}}  # fmt: skip
    citus = {
        "rate": 400.0,
        "ops": 1000,
        "cpu": {"coordinator": 10.0, "seconds": 2.0},
        "ms_per_op": {"coordinator": 0.2, "worker1": 0.5, "worker2": 0.25, "server": 0.6},
        "remote": {"pop100": {"coordinator": 1.0}, "ack100": {"coordinator": 3.0}},
    }
    idle: dict[str, dict[str, float | None]] = {
        "plain": {"postgres": 10.0},
        "citus": {"coordinator": 5.0},
    }
    figures = figures_of("popack100", plain, citus, idle)
    assert figures == {
        "popack100_plain_ms": 0.8,
        "popack100_plain_rate": 500.0,
        "popack100_coord_ms": 0.2,
        "popack100_coord_pct": 25.0,
        "popack100_coord_net_pct": round(0.1 / 0.6 * 100, 1),
        "popack100_workers_ms": 0.75,
        "popack100_citus_rate": 400.0,
        "pop100_remote": 1.0,
        "ack100_remote": 3.0,
    }
    # the cluster not measured (its server failed): the plain side's figures only
    assert set(figures_of("push1", plain, None, idle)) == {"push1_plain_ms", "push1_plain_rate"}
