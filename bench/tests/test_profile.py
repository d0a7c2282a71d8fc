"""scripts/bench py-spy output: collapsed stacks and their summary."""

from __future__ import annotations

from pathlib import Path

from bench.profile import frame_name, parse_collapsed, summarise, summary_markdown

RAW = (
    "<module> (gunicorn:8);run (/x/site-packages/gunicorn/arbiter.py:200);"
    "on_post (/work/main/queen_threads/resources/push.py:19);"
    "dumps (/work/main/queen_threads/http/request.py:70) 30\n"
    "<module> (gunicorn:8);run (/x/site-packages/gunicorn/arbiter.py:200);"
    "on_post (/work/main/queen_threads/resources/push.py:19);"
    "execute (/x/site-packages/psycopg2/extras.py:10) 60\n"
    "<module> (gunicorn:8);handle (/x/site-packages/gevent/pywsgi.py:1) 10\n"
    "garbage line\n"
)


def test_frame_name_shortens_paths_and_drops_line_numbers() -> None:
    assert frame_name("on_post (/work/main/queen_threads/resources/push.py:19)") == (
        "on_post (queen_threads/resources/push.py)"
    )
    assert frame_name("run (/x/lib/python3.11/site-packages/gunicorn/arbiter.py:200)") == (
        "run (gunicorn/arbiter.py)"
    )
    assert frame_name("weird frame") == "weird frame"


def test_parse_and_summarise() -> None:
    stacks = parse_collapsed(RAW)
    assert len(stacks) == 3
    summary = summarise(stacks, top=3)
    assert summary.samples == 100
    assert summary.self_top[0] == ("execute (psycopg2/extras.py)", 60)
    inclusive = dict(summary.inclusive_top)
    assert inclusive["<module> (gunicorn)"] == 100
    assert inclusive["on_post (queen_threads/resources/push.py)"] == 90
    as_dict = summary.as_dict()
    assert as_dict["self"][0]["pct"] == 60.0


def test_recursive_frames_count_once_inclusively() -> None:
    summary = summarise([(["a", "b", "a"], 4)])
    assert dict(summary.inclusive_top) == {"a": 4, "b": 4}
    assert summary.self_top == [("a", 4)]


def test_markdown_summary() -> None:
    text = summary_markdown("b-connections_64", summarise(parse_collapsed(RAW)).as_dict(), top=2)
    assert text.startswith("### b-connections_64: 100 samples")
    assert "| 60.0 | `execute (psycopg2/extras.py)` |" in text


def test_frame_name_of_stdlib_frames() -> None:
    assert frame_name("wait (/root/.pyenv/versions/3.11.7/lib/python3.11/threading.py:320)") == (
        "wait (threading.py)"
    )


def test_python_self_attributes_native_leaves_to_the_innermost_python_frame() -> None:
    stacks = parse_collapsed(
        "main (/a/queen_threads/app.py:1);fetch_one (/a/queen_threads/db.py:9);send (libc.so.6) 7\n"
        "main (/a/queen_threads/app.py:1);epoll_wait (libc.so.6) 3\n"
    )
    summary = summarise(stacks)
    assert summary.self_top == [("send (libc.so.6)", 7), ("epoll_wait (libc.so.6)", 3)]
    assert summary.python_self_top == [
        ("fetch_one (queen_threads/db.py)", 7),
        ("main (queen_threads/app.py)", 3),
    ]


def test_cpu_profile_stacks_of_every_worker_are_summarised(tmp_path: Path) -> None:
    from bench.main import cpu_profile_summary
    from bench.options import parse_args

    handle = "handle (/x/gunicorn/workers/base_async.py:38)"
    (tmp_path / "w1.txt").write_text(
        f"{handle};on_post (/x/queen_threads/queue/routes/push.py:41) 3\n"
    )
    (tmp_path / "w2.txt").write_text(f"{handle} 1\n")
    summary = cpu_profile_summary(tmp_path)
    assert summary["samples"] == 4
    assert summary["self"][0] == {
        "frame": "on_post (queen_threads/queue/routes/push.py)", "samples": 3, "pct": 75.0
    }  # fmt: skip
    assert len(summary["files"]) == 2
    assert parse_args(["--cpu-profile", str(tmp_path)]).cpu_profile == str(tmp_path)
