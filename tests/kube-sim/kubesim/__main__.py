# SPDX-License-Identifier: Apache-2.0
"""python3 -m kubesim DIR [options]: run the simulator in the foreground."""

from .main import main

main()
