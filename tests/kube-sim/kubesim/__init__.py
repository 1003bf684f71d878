"""A local Kubernetes API server simulator (stdlib only)."""
