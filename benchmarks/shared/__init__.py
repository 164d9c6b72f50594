"""Code shared by benchmark scripts (not a benchmark itself: ``dev.py bench`` runs the scripts
in ``benchmarks/``, which import this package after putting their own folder on the path)."""
