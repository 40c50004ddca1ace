"""``make`` as a user types it, from a test: an environment without the variables of an enclosing make.

The suite itself runs under make (``make test``, CI's ``.ci/run``): ``MAKELEVEL``, ``MAKEFLAGS`` and their kin
would turn the tests' own ``make`` into a sub-make (``make[1]: *** ...`` instead of ``make: *** ...``, the outer
make's flags). :func:`user_make_env` drops them, so a test sees what a user's terminal shows.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

MAKE_VARIABLES = ("MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES", "MAKE_TERMOUT", "MAKE_TERMERR")


def user_make_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """``os.environ`` without :data:`MAKE_VARIABLES`, updated with ``extra``."""
    env = {name: value for name, value in os.environ.items() if name not in MAKE_VARIABLES}
    env.update(extra or {})
    return env
