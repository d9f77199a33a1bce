"""`python -m biggraphite_like.cli`: the same as `bgl`."""
from biggraphite_like.cli import main_entry

main_entry()
