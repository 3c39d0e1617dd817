import sys

from scripts.cli import main

if __name__ == "__main__":  # a spawned worker process (paravt repro --jobs) imports this module without running it
    sys.exit(main())
