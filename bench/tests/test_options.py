"""scripts/bench argument parsing."""

from __future__ import annotations

import pytest

from bench.options import DEFAULT_SCENARIOS, FULL, QUICK, parse_args


def test_defaults_start_a_server_and_run_everything_three_times() -> None:
    o = parse_args([])
    assert o.start_server and o.url is None
    assert o.scenarios == DEFAULT_SCENARIOS
    assert o.sizes == FULL and o.sizes.runs == 3
    assert o.workers == 2
    assert o.sizes.idle_polls == 10_000 and o.sizes.latency_reps == 50
    assert o.sizes.consume_messages == 20_000 and o.sizes.fanout_messages == 10_000
    assert o.quiet_wait_s == 60.0
    assert o.ceilings
    assert "g" in o.scenarios and o.sizes.e2e_duration_s == 60.0 and o.sizes.e2e_rate == 1000.0


def test_ceilings_on_for_full_runs_off_for_quick_unless_asked() -> None:
    assert not parse_args(["--no-ceilings"]).ceilings
    assert not parse_args(["--quick"]).ceilings
    assert parse_args(["--quick", "--ceilings"]).ceilings


def test_e2e_rate_and_duration() -> None:
    s = parse_args(["--quick", "--e2e-rate", "2500", "--e2e-duration", "20"]).sizes
    assert (s.e2e_rate, s.e2e_duration_s, s.e2e_step_s) == (2500.0, 20.0, QUICK.e2e_step_s)
    assert QUICK.e2e_duration_s == 10.0 and FULL.e2e_step_s == 15.0
    with pytest.raises(SystemExit):
        parse_args(["--e2e-rate", "0"])


def test_the_auth_comparison_runs_only_on_request() -> None:
    assert "i" not in parse_args([]).scenarios
    assert "j" not in parse_args([]).scenarios  # it fills the database: on request
    assert parse_args(["--scenarios", "j"]).scenarios == ("j",)
    assert parse_args(["--scenarios", "b,i"]).scenarios == ("b", "i")


def test_quick_uses_small_sizes_and_one_run() -> None:
    o = parse_args(["--quick"])
    assert o.sizes == QUICK and o.sizes.runs == 1
    assert o.sizes.idle_polls == 1_000 and o.sizes.latency_reps == 10
    assert o.quiet_wait_s == 0.0


def test_url_targets_a_running_server() -> None:
    o = parse_args(["--url", "http://127.0.0.1:6632/", "--database-url", "postgresql://x/y"])
    assert not o.start_server
    assert o.url == "http://127.0.0.1:6632"
    assert o.database_url == "postgresql://x/y"


def test_url_and_start_exclude_each_other() -> None:
    with pytest.raises(SystemExit):
        parse_args(["--url", "http://h:1", "--start"])


def test_pids_only_with_url() -> None:
    with pytest.raises(SystemExit):
        parse_args(["--server-pid", "12"])


def test_scenarios_are_deduplicated_lower_cased_and_checked() -> None:
    assert parse_args(["--scenarios", "B, a,b"]).scenarios == ("b", "a")
    with pytest.raises(SystemExit):
        parse_args(["--scenarios", "a,ab"])  # every letter is a scenario; "ab" is none
    with pytest.raises(SystemExit):
        parse_args(["--scenarios", ","])


def test_overrides_apply_on_top_of_quick() -> None:
    o = parse_args(["--quick", "--runs", "2", "--idle-polls", "500", "--duration", "1.5",
                    "--latency-reps", "7", "--idle-hold", "5", "--idle-queues", "3"])  # fmt: skip
    s = o.sizes
    assert (s.runs, s.idle_polls, s.duration_s, s.latency_reps, s.idle_hold_s, s.idle_queues) == (
        2, 500, 1.5, 7, 5.0, 3,
    )  # fmt: skip
    assert s.consume_messages == QUICK.consume_messages
    assert s.push_partitions == 1
    assert parse_args(["--push-partitions", "16"]).sizes.push_partitions == 16


@pytest.mark.parametrize("bad", [["--runs", "0"], ["--duration", "-1"], ["--workers", "0"]])
def test_non_positive_sizes_are_rejected(bad: list[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(bad)


def test_server_env_pairs_and_profile() -> None:
    o = parse_args(["--server-env", "POLL_WORKER_COUNT=4", "--server-env", "A_B=x=y",
                    "--profile", "b"])  # fmt: skip
    assert o.server_env == (("POLL_WORKER_COUNT", "4"), ("A_B", "x=y"))
    assert o.profile == ("b",)
    with pytest.raises(SystemExit):
        parse_args(["--server-env", "novalue"])


def test_argv_is_kept_for_the_report() -> None:
    assert parse_args(["--quick", "--json", "out.json"]).argv == ("--quick", "--json", "out.json")
