"""``python -m training.launch <torchrun arguments>``: ``torchrun`` (``torch.distributed.run``, in this process) that
stops when the process that launched it dies.

The Dagster training asset launches it for ``training.nproc_per_node`` above 1 (:func:`assets.models.launch_command`).
The launcher watches its own parent (:func:`training.supervision.watch_parent`): when the Dagster process dies, even
by SIGKILL, it gets SIGTERM, on which torchrun stops its workers. It names itself to its workers as the parent they
expect (:data:`training.supervision.SUPERVISOR_ENV`); each rank watches it in turn, so that a SIGKILLed launcher, which
stops no worker, still leaves none behind (``pipelines.pipes_train`` and ``python -m training`` under torchrun).
"""

from __future__ import annotations

import os
import sys

from training.supervision import SUPERVISOR_ENV, supervisor_value, watch_parent


def main(argv: list[str] | None = None) -> int:
    """Run torchrun with ``argv`` (default: the command line) under the parent watch."""
    watch_parent()
    os.environ[SUPERVISOR_ENV] = supervisor_value()  # torchrun's agent, this process, starts the ranks
    from torch.distributed.run import main as torchrun

    torchrun(sys.argv[1:] if argv is None else argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
