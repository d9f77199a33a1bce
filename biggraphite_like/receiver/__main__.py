"""`python -m biggraphite_like.receiver [options]` is `bgl receive [options]` without the CLI
package (command.py)."""
import sys

from biggraphite_like.receiver.command import main

if __name__ == "__main__":
    sys.exit(main())
