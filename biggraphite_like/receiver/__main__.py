"""`python -m biggraphite_like.receiver [options]` is `bgl receive [options]` (how `bgl run`
starts it; the store comes from $BGL_STORE, so a password never shows in `ps`)."""
import sys

from biggraphite_like.cli import main

sys.exit(main(["receive", *sys.argv[1:]]))
