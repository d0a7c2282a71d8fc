"""The official client queen-mq 2.6.0's own acceptance tests, run against this server.

`scripts/test` installs the client and its sdist's `tests/` folder into `.venv/client26/`
(`scripts/_client26.sh`); `run.py` runs that folder in a pytest subprocess of its own, with
`.venv/client26/lib` first on PYTHONPATH (the 0.15.0 client of `.venv` imports as `queen`
too) and `sdist_conftest.py` as its `conftest.py` (the sdist ships none: it expects a
`client` fixture and `QUEEN_SERVER_URL`). `tests/acceptance/test_client26.py` turns the
results into one test per sdist file, with the files of unfinished features marked
expected-to-fail by issue.
"""
