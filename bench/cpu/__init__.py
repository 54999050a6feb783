"""In-process benchmarks: CPU (time or instructions) per call of the service's own code, no sockets."""
