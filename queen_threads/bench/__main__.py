"""`python -m queen_threads.bench`: the same as `scripts/bench`."""

import sys

from queen_threads.bench.main import main

sys.exit(main())
