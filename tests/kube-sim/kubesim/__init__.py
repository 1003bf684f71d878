# SPDX-License-Identifier: Apache-2.0
"""A local Kubernetes API server simulator (stdlib only)."""
