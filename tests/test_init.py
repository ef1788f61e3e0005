"""``import veil``: what importing the package sets for the whole process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

CODE = "import os, sys, veil; assert 'torch' not in sys.modules; print(os.environ.get('OMP_WAIT_POLICY'))"


@pytest.mark.parametrize(("given", "expected"), [(None, "PASSIVE"), ("ACTIVE", "ACTIVE")])
def test_openmp_threads_sleep_unless_the_user_chose_otherwise(given, expected):
    """veil sets OMP_WAIT_POLICY=PASSIVE before anything loads torch (libgomp reads it once, then), and keeps a
    value the user set."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if given is not None:
        env["OMP_WAIT_POLICY"] = given
    run = subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True, text=True, check=True)
    assert run.stdout.strip() == expected
