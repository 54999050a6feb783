"""The real-cluster harness of scripts/e2e-cluster (docs/e2e-cluster.md)."""
