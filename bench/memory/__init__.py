"""Memory benchmarks: RSS and heap over whole cycles, served and in one process, and how cost grows with the cluster."""
