"""`python -m bench` (from the repository root): the same as `scripts/bench`."""

import sys

from bench.main import main

sys.exit(main())
