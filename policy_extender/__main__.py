"""``python -m policy_extender`` is the ``policy-extender`` command."""

import sys

from policy_extender.cli import main

sys.exit(main())
