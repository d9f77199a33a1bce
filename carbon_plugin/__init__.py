"""carbon-cache database plugins over the biggraphite_like accessor.

Importing this package registers `biggraphite_like` and `whisper+biggraphite_like` with
carbon (carbon.database.TimeSeriesDatabase.plugins); `bgl-carbon-cache` (launcher.py) does
it before running carbon-cache, so carbon.conf can say `DATABASE = biggraphite_like`.
"""
from carbon_plugin.database import BigGraphiteLikeDatabase, WhisperAndBigGraphiteLikeDatabase

__all__ = ["BigGraphiteLikeDatabase", "WhisperAndBigGraphiteLikeDatabase"]
