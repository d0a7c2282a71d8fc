# Sourced by scripts/test: the official client queen-mq 2.6.0 and its own acceptance tests,
# beside the 0.15.0 client of .venv (both import as `queen`, so 2.6.0 lives in a folder of
# its own that only the 2.6.0 test run puts on PYTHONPATH; tests/client26/).
#   .venv/client26/lib    queen-mq 2.6.0 and pytest-asyncio (no dependencies: httpx and
#                         pytest come from .venv)
#   .venv/client26/tests  the tests/ folder of the queen-mq 2.6.0 sdist, as published
set -euo pipefail
CLIENT26_VERSION=2.6.0
CLIENT26_DIR="$ROOT/.venv/client26"
CLIENT26_STAMP="$CLIENT26_DIR/.installed-$CLIENT26_VERSION"
if [ ! -f "$CLIENT26_STAMP" ]; then
    echo "== installing queen-mq $CLIENT26_VERSION and its tests into $CLIENT26_DIR"
    rm -rf "$CLIENT26_DIR"
    mkdir -p "$CLIENT26_DIR"
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps \
        --target "$CLIENT26_DIR/lib" "queen-mq==$CLIENT26_VERSION" "pytest-asyncio==1.5.0"
    sdist=$(mktemp -d)
    .venv/bin/python -m pip download --quiet --disable-pip-version-check --no-deps \
        --no-binary :all: -d "$sdist" "queen-mq==$CLIENT26_VERSION"
    tar -xzf "$sdist"/queen_mq-"$CLIENT26_VERSION".tar.gz -C "$sdist"
    cp -r "$sdist/queen_mq-$CLIENT26_VERSION/tests" "$CLIENT26_DIR/tests"
    rm -rf "$sdist"
    touch "$CLIENT26_STAMP"
fi
