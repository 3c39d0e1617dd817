"""``python -m paravt``: the ``paravt`` command line, where the console script is not on PATH."""
import sys

from paravt.cli import main

if __name__ == "__main__":  # a spawned worker process (paravt repro --jobs) imports this module without running it
    sys.exit(main())
