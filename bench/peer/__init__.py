"""The parts of bench/peer_bench.py (our stack against VictoriaMetrics), one module a part."""
