# SPDX-License-Identifier: Apache-2.0
"""kpgpud's sharing-mode study: a discrete-event simulator of tenants'
LLM calls on GPU partitions (see study/README.md)."""
